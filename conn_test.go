package kctl

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/transport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestClient_FaultInjection_TooManyRequests_IsRetriedThenGivesUp(t *testing.T) {
	var calls, failures atomic.Int32
	failures.Store(2)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= failures.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	g := NewClient[gizmo](conn)
	if obj, err := g.Get(t.Context(), "ns", "a"); err != nil || obj.Name != "a" || calls.Load() != 3 {
		t.Errorf("Get after two 429s = %v, %v after %d calls; want the object after 3 calls", obj, err, calls.Load())
	}
	calls.Store(0)
	failures.Store(1000)
	if _, err := g.Get(t.Context(), "ns", "a"); !apierrors.IsTooManyRequests(err) || calls.Load() != transport.MaxRetries+1 {
		t.Errorf("Get always answered 429: err = %v after %d calls; want TooManyRequests after %d", err, calls.Load(), transport.MaxRetries+1)
	}
}

func TestClient_FaultInjection_TooManyRequests_WaitHonorsTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		cancel()
	})
	start := time.Now()
	_, err := NewClient[gizmo](conn).Get(ctx, "ns", "a")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Errorf("Get with a canceled context during Retry-After: err = %v after %v", err, time.Since(start))
	}
}

// A 429 with Retry-After: 1 is retried one second later, not at once.
func TestClient_FaultInjection_TooManyRequestsRetryAfterOne_RetriesASecondLater(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		n := len(arrivals)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	obj, err := NewClient[gizmo](conn).Get(t.Context(), "ns", "a")
	if err != nil || obj.Name != "a" {
		t.Fatalf("Get after a 429 = %v, %v; want the object", obj, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 2 || arrivals[1].Sub(arrivals[0]) < time.Second {
		t.Errorf("%d requests, %v apart; want the retry at least 1s after the 429 with Retry-After: 1", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}
}
