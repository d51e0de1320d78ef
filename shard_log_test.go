package kctl

// The record of a shard group test: every reconcile of every member,
// when and of which key (shardLog), and what is checked on it: no key
// reconciled by two members at once (overlaps), who reconciled what
// (since), and what each reconcile found in its member's cache
// (miscounted).

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardSpan is one reconcile: by which member, of which key, when, and
// how many Pods of its ReplicaSet it found in the member's cache (-1:
// it did not look).
type shardSpan struct {
	member     string
	key        Key
	start, end time.Time
	pods       int
}

// shardLog records every reconcile of every member.
type shardLog struct {
	mu    sync.Mutex
	spans []shardSpan
}

// reconcile is member's reconcile function: it records its span, and
// works for 2 ms (or until its context ends) so that overlaps would show.
func (l *shardLog) reconcile(member string) func(context.Context, *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		l.work(ctx, member, Key{rs.Namespace, rs.Name}, -1)
		return Result{}, nil
	}
}

// countPods is member's reconcile function of podcount: it counts the
// ReplicaSet's Pods in the member's cache of Pod metadata, then records
// its span as reconcile does.
func (l *shardLog) countPods(member string, pods func(ListOptions) int) func(context.Context, *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return Result{}, Terminal(err)
		}
		n := pods(ListOptions{Namespace: rs.Namespace, Labels: sel})
		l.work(ctx, member, Key{rs.Namespace, rs.Name}, n)
		return Result{}, nil
	}
}

// work records a reconcile of key by member that found pods Pods, which
// works for 2 ms from now or until ctx ends.
func (l *shardLog) work(ctx context.Context, member string, key Key, pods int) {
	sp := shardSpan{member: member, key: key, start: time.Now(), pods: pods}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Millisecond): // the reconcile's work
	}
	sp.end = time.Now()
	l.mu.Lock()
	l.spans = append(l.spans, sp)
	l.mu.Unlock()
}

// miscounted lists the reconciles of the keys in ours that found other
// than want Pods.
func (l *shardLog) miscounted(ours map[Key]bool, want int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for _, sp := range l.spans {
		if ours[sp.key] && sp.pods != want {
			bad = append(bad, fmt.Sprintf("%s by %s at %s: %d Pods", sp.key, sp.member, sp.start.Format(time.StampMicro), sp.pods))
		}
	}
	return bad
}

// len is how many reconciles l recorded.
func (l *shardLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans)
}

// since returns, by key, the members that reconciled it starting at or
// after t.
func (l *shardLog) since(t time.Time) map[Key][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Key][]string{}
	for _, sp := range l.spans {
		if !sp.start.Before(t) {
			out[sp.key] = append(out[sp.key], sp.member)
		}
	}
	return out
}

// overlaps lists every pair of reconciles of one key by two members at
// overlapping times.
func (l *shardLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[Key][]shardSpan{}
	for _, sp := range l.spans {
		byKey[sp.key] = append(byKey[sp.key], sp)
	}
	var bad []string
	for k, sps := range byKey {
		for i, a := range sps {
			for _, b := range sps[i+1:] {
				if a.member != b.member && a.start.Before(b.end) && b.start.Before(a.end) {
					bad = append(bad, fmt.Sprintf("%s: %s [%v, %v] and %s [%v, %v]", k,
						a.member, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro),
						b.member, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro)))
				}
			}
		}
	}
	return bad
}
