package main

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// labelWatch follows the pod-count label of the ReplicaSets in one namespace,
// as the harness sees them through a watch.
type labelWatch struct {
	stop    chan struct{}
	factory informers.SharedInformerFactory

	mu      sync.Mutex
	obs     map[string][]observation // label values in the order seen, with when
	cur     map[string]string
	want    map[string]string // the values to wait for
	good    int               // ReplicaSets whose cur equals want
	goodAt  time.Time         // when good last reached len(want)
	allGood chan struct{}     // closed when good reaches len(want); replaced by expect
	writes  int               // update events, i.e. writes by the controller
}

type observation struct {
	value string
	at    time.Time
}

func newLabelWatch(cs kubernetes.Interface, ns string) *labelWatch {
	w := &labelWatch{stop: make(chan struct{}), obs: map[string][]observation{}, cur: map[string]string{},
		want: map[string]string{}, allGood: make(chan struct{})}
	w.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := w.factory.Apps().V1().ReplicaSets().Informer()
	inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.seen(obj, false) },
		UpdateFunc: func(_, obj any) { w.seen(obj, true) },
	})
	w.factory.Start(w.stop)
	w.factory.WaitForCacheSync(w.stop)
	return w
}

func (w *labelWatch) close() {
	close(w.stop)
	w.factory.Shutdown()
}

func (w *labelWatch) seen(obj any, update bool) {
	now := time.Now()
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	v, has := rs.Labels["pod-count"]
	if !has {
		v = "<none>"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if update {
		w.writes++
	}
	old, had := w.cur[rs.Name]
	if had && old == v {
		return
	}
	w.cur[rs.Name] = v
	w.obs[rs.Name] = append(w.obs[rs.Name], observation{v, now})
	if want, ok := w.want[rs.Name]; ok {
		if had && old == want {
			w.good--
		}
		if v == want {
			w.good++
		}
		w.checkLocked(now)
	}
}

// expect sets the label values to wait for and returns a channel closed once all hold.
func (w *labelWatch) expect(want map[string]string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.good, w.allGood = want, 0, make(chan struct{})
	for name, v := range want {
		if w.cur[name] == v {
			w.good++
		}
	}
	w.checkLocked(time.Now())
	return w.allGood
}

func (w *labelWatch) checkLocked(now time.Time) {
	if w.good == len(w.want) {
		select {
		case <-w.allGood:
		default:
			w.goodAt = now
			close(w.allGood)
		}
	}
}

// firstAfter returns when name's label first showed v at or after t.
func (w *labelWatch) firstAfter(name, v string, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.obs[name] {
		if o.value == v && !o.at.Before(t) {
			return o.at, true
		}
	}
	return time.Time{}, false
}

func (w *labelWatch) stats() (goodAt time.Time, good, writes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.goodAt, w.good, w.writes
}
