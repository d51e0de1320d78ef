package kctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// fakeEvents is an events.Sink that keeps Events in memory, like the API
// server: create stores a copy, repeat sets count and lastTimestamp.
type fakeEvents struct {
	mu      sync.Mutex
	events  map[string]*corev1.Event // by namespace/name
	order   []string
	creates int
	patches int
	fail    []error // returned by the next writes, in order
}

func newFakeEvents() *fakeEvents { return &fakeEvents{events: map[string]*corev1.Event{}} }

func (f *fakeEvents) failNext() error {
	if len(f.fail) == 0 {
		return nil
	}
	err := f.fail[0]
	f.fail = f.fail[1:]
	return err
}

func (f *fakeEvents) Create(_ context.Context, ev *corev1.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failNext(); err != nil {
		return err
	}
	f.creates++
	key := ev.Namespace + "/" + ev.Name
	if _, ok := f.events[key]; ok {
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, ev.Name)
	}
	ev.ResourceVersion = "1"
	f.events[key] = ev.DeepCopy()
	f.order = append(f.order, key)
	return nil
}

func (f *fakeEvents) Repeat(_ context.Context, namespace, name string, count int32, last time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failNext(); err != nil {
		return err
	}
	f.patches++
	ev, ok := f.events[namespace+"/"+name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, name)
	}
	ev.Count = count
	ev.LastTimestamp = metav1.NewTime(last)
	return nil
}

// list returns the Events in the order they were created.
func (f *fakeEvents) list() []*corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*corev1.Event
	for _, k := range f.order {
		if ev, ok := f.events[k]; ok {
			out = append(out, ev.DeepCopy())
		}
	}
	return out
}

// testRecorder returns a recorder writing to a fake, and its log.
func testRecorder() (*EventRecorder, *fakeEvents, *bytes.Buffer) {
	var log bytes.Buffer
	r := newEventRecorder(nil, "widget-controller", slog.New(slog.NewTextHandler(&log, nil)))
	sink := newFakeEvents()
	r.sink = sink
	return r, sink, &log
}

// runRecorder runs r.deliver in the bubble until the test ends.
func runRecorder(t *testing.T, r *EventRecorder) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.deliver(ctx, flushIn(3*time.Second)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// flushIn returns a flushBy for deliver: d after the moment it is called.
func flushIn(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

func eventPod(name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: "7"}}
}

func TestEventRecorder_TenIdenticalEvents_BecomeOneEventWithCountTen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, _ := testRecorder()
		runRecorder(t, r)
		pod := eventPod("web-0", "uid-1")
		start := time.Now()
		for range 10 {
			r.Event(pod, corev1.EventTypeWarning, "BackOff", "restarting failed container")
			time.Sleep(time.Second)
		}
		synctest.Wait()
		evs := sink.list()
		if len(evs) != 1 || sink.creates != 1 || sink.patches != 9 {
			t.Fatalf("10 identical Events: %d Events, %d creates, %d patches; want 1, 1, 9", len(evs), sink.creates, sink.patches)
		}
		ev := evs[0]
		if ev.Count != 10 || !ev.FirstTimestamp.Time.Equal(start) || !ev.LastTimestamp.Time.Equal(start.Add(9*time.Second)) {
			t.Errorf("Event count %d, first %v, last %v; want 10, %v, %v", ev.Count, ev.FirstTimestamp, ev.LastTimestamp, start, start.Add(9*time.Second))
		}
	})
}

func TestEventRecorder_NewEvent_CarriesObjectSourceAndClientGoName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, _ := testRecorder()
		runRecorder(t, r)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-d", ResourceVersion: "42"}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-n"}} // cluster-scoped, no TypeMeta
		r.Eventf(dep, corev1.EventTypeNormal, "ScalingReplicaSet", "scaled up to %d", 3)
		r.Event(node, corev1.EventTypeNormal, "Ready", "node is ready")
		synctest.Wait()
		evs := sink.list()
		if len(evs) != 2 {
			t.Fatalf("got %d Events, want 2", len(evs))
		}
		d, n := evs[0], evs[1]
		wantRef := corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "ns", Name: "web", UID: "uid-d", ResourceVersion: "42"}
		if d.InvolvedObject != wantRef {
			t.Errorf("involvedObject = %+v, want %+v", d.InvolvedObject, wantRef)
		}
		if want := fmt.Sprintf("web.%x", time.Now().UnixNano()); d.Name != want || d.Namespace != "ns" {
			t.Errorf("Event %s/%s, want ns/%s", d.Namespace, d.Name, want)
		}
		if d.Reason != "ScalingReplicaSet" || d.Message != "scaled up to 3" || d.Type != "Normal" || d.Count != 1 ||
			d.Source.Component != "widget-controller" || d.ReportingController != "widget-controller" || d.ReportingInstance != d.Source.Host {
			t.Errorf("Event = %+v", d)
		}
		if n.Namespace != "default" || n.InvolvedObject.Kind != "Node" || n.InvolvedObject.APIVersion != "v1" || n.InvolvedObject.Namespace != "" {
			t.Errorf("Event about a Node: namespace %q, involvedObject %+v; want namespace default, a v1 Node", n.Namespace, n.InvolvedObject)
		}
	})
}

func TestEventRecorder_DifferentReasonMessageOrType_AreSeparateEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, _ := testRecorder()
		runRecorder(t, r)
		pod := eventPod("web-0", "uid-1")
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a")
		time.Sleep(time.Microsecond) // Event names carry the time in nanoseconds
		r.Event(pod, corev1.EventTypeWarning, "Failed", "b")
		time.Sleep(time.Microsecond)
		r.Event(pod, corev1.EventTypeWarning, "Other", "a")
		time.Sleep(time.Microsecond)
		r.Event(pod, corev1.EventTypeNormal, "Failed", "a")
		time.Sleep(time.Microsecond)
		r.Event(eventPod("web-1", "uid-2"), corev1.EventTypeWarning, "Failed", "a")
		synctest.Wait()
		if n := len(sink.list()); n != 5 || sink.patches != 0 {
			t.Errorf("5 different Events: %d Events, %d patches; want 5, 0", n, sink.patches)
		}
	})
}

func TestEventRecorder_RepeatAfterMergeWindow_CreatesNewEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, _ := testRecorder()
		runRecorder(t, r)
		pod := eventPod("web-0", "uid-1")
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a")
		time.Sleep(events.MergeWindow - time.Second)
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a") // merged
		time.Sleep(events.MergeWindow)
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a") // too long after the last one
		synctest.Wait()
		evs := sink.list()
		if len(evs) != 2 || evs[0].Count != 2 || evs[1].Count != 1 {
			t.Fatalf("got %d Events, want 2 with counts 2 and 1: %+v", len(evs), evs)
		}
	})
}

func TestEventRecorder_ExpiredEvent_RepeatCreatesNewEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, log := testRecorder()
		runRecorder(t, r)
		pod := eventPod("web-0", "uid-1")
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a")
		synctest.Wait()
		sink.mu.Lock()
		clear(sink.events) // the API server's --event-ttl
		sink.mu.Unlock()
		time.Sleep(time.Second)
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a")
		time.Sleep(time.Second)
		r.Event(pod, corev1.EventTypeWarning, "Failed", "a")
		synctest.Wait()
		evs := sink.list()
		if len(evs) != 1 || evs[0].Count != 2 || sink.creates != 2 {
			t.Errorf("after expiry: %d Events (want 1, count 2), %d creates (want 2): %+v", len(evs), sink.creates, evs)
		}
		if log.Len() > 0 {
			t.Errorf("an expired Event is not an error, but the log says:\n%s", log)
		}
	})
}

func TestEventRecorder_Flood_25ThenOnePerFiveMinutesPerObjectAndType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, _ := testRecorder()
		runRecorder(t, r)
		pod := eventPod("web-0", "uid-1")
		for i := range 30 {
			r.Eventf(pod, corev1.EventTypeWarning, "Failed", "attempt %d", i)
		}
		r.Event(pod, corev1.EventTypeNormal, "Started", "own bucket")                 // another type
		r.Event(eventPod("web-1", "uid-2"), corev1.EventTypeWarning, "Failed", "own") // another object
		synctest.Wait()
		if n := len(sink.list()); n != 27 || r.limited.Load() != 5 {
			t.Fatalf("30+2 Events: %d written, %d limited; want 27, 5", n, r.limited.Load())
		}
		time.Sleep(events.Refill)
		r.Event(pod, corev1.EventTypeWarning, "Failed", "after 5 minutes")
		r.Event(pod, corev1.EventTypeWarning, "Failed", "one too many")
		synctest.Wait()
		if n := len(sink.list()); n != 28 || r.limited.Load() != 6 {
			t.Errorf("5 minutes later: %d written, %d limited; want 28, 6", n, r.limited.Load())
		}
	})
}

func TestEventRecorder_BufferFull_DropsWithoutBlockingAndLogsOnce(t *testing.T) {
	r, sink, log := testRecorder() // not running: nothing drains the buffer
	for i := range eventBuffer + 5 {
		r.Event(eventPod("web", fmt.Sprint("uid-", i)), corev1.EventTypeNormal, "Created", "x")
	}
	if got := r.dropped.Load(); got != 5 {
		t.Errorf("dropped = %d, want 5", got)
	}
	if n := strings.Count(log.String(), "Event buffer full"); n != 1 {
		t.Errorf("logged the full buffer %d times, want once:\n%s", n, log)
	}
	synctest.Test(t, func(t *testing.T) { // the buffered ones are written once run starts
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // and even when run's ctx has ended: run flushes the buffer
		r.deliver(ctx, flushIn(3*time.Second))
		if n := len(sink.list()); n != eventBuffer {
			t.Errorf("run wrote %d buffered Events, want %d", n, eventBuffer)
		}
	})
}

func TestEventRecorder_TransientErrors_Retried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sink, log := testRecorder()
		sink.fail = []error{apierrors.NewServiceUnavailable("starting"), apierrors.NewTooManyRequests("slow down", 1)}
		runRecorder(t, r)
		start := time.Now()
		r.Event(eventPod("web-0", "uid-1"), corev1.EventTypeNormal, "Created", "x")
		synctest.Wait()
		if len(sink.list()) != 0 {
			t.Fatalf("written before the retry delay")
		}
		time.Sleep(3 * time.Second) // 1s, then 2s
		synctest.Wait()
		if n := len(sink.list()); n != 1 || time.Since(start) != 3*time.Second || log.Len() != 0 {
			t.Errorf("after two transient errors: %d Events (want 1); log:\n%s", n, log)
		}

		sink.fail = []error{apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", fmt.Errorf("no RBAC"))}
		r.Event(eventPod("web-1", "uid-2"), corev1.EventTypeNormal, "Created", "x")
		synctest.Wait()
		if n := len(sink.list()); n != 1 || !strings.Contains(log.String(), "could not write Event") {
			t.Errorf("after Forbidden: %d Events (want 1, no retry) and an error log; log:\n%s", n, log)
		}
	})
}

func TestEventRecorder_NilRecorderNilObjectAndBadType_DropQuietly(t *testing.T) {
	var nilRec *EventRecorder
	nilRec.Event(eventPod("a", "b"), corev1.EventTypeNormal, "R", "m")
	nilRec.Eventf(eventPod("a", "b"), corev1.EventTypeNormal, "R", "m %d", 1)

	r, _, log := testRecorder()
	var pod *corev1.Pod
	r.Event(pod, corev1.EventTypeNormal, "R", "m")
	r.Event(nil, corev1.EventTypeNormal, "R", "m")
	r.Event(eventPod("a", "b"), "Error", "R", "m")
	if len(r.queue) != 0 {
		t.Errorf("%d Events queued, want 0", len(r.queue))
	}
	if !strings.Contains(log.String(), "unsupported type") {
		t.Errorf("an unsupported type was not logged:\n%s", log)
	}
}

// Integration tests against the control plane.

// onServer is an Event recorder writing through a connection of cfg, its
// log (also the test's), and a ConfigMap "settings" the admin made in a
// namespace of the test's own, for Events to be about. Its writer runs
// from run until the test ends.
type onServer struct {
	admin *Conn
	cm    *corev1.ConfigMap
	r     *EventRecorder
	log   *logBuffer
}

func newOnServer(t *testing.T, admin *rest.Config, ns string, cfg *rest.Config) *onServer {
	t.Helper()
	adminConn, err1 := NewConn(admin)
	conn, err2 := NewConn(cfg)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	if err := NewClient[corev1.ConfigMap](adminConn).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	log := &logBuffer{}
	r := newEventRecorder(conn, "kctl-test", slog.New(slog.NewTextHandler(io.MultiWriter(log, t.Output()), nil)))
	return &onServer{admin: adminConn, cm: cm, r: r, log: log}
}

func (o *onServer) run(t *testing.T) { runRecorder(t, o.r) }

func TestEventRecorder_OnConfigMap_EventAppearsWithReason(t *testing.T) {
	cfg := testConfig(t)
	o := newOnServer(t, cfg, testNamespace(t, cfg), cfg)
	o.run(t)
	o.r.Event(o.cm, corev1.EventTypeWarning, "InvalidSetting", "mode must be fast or slow")
	ev := waitForEvent(t, o.admin, o.cm, 1)
	if ev.Reason != "InvalidSetting" || ev.Type != "Warning" || ev.Message != "mode must be fast or slow" ||
		ev.InvolvedObject.Kind != "ConfigMap" || ev.InvolvedObject.APIVersion != "v1" || ev.ReportingController != "kctl-test" {
		t.Errorf("Event on the server = %+v", ev)
	}
	v1, err := NewClient[eventsv1.Event](o.admin).Get(t.Context(), ev.Namespace, ev.Name)
	if err != nil {
		t.Fatalf("the Event through events.k8s.io/v1: %v", err)
	}
	if v1.ReportingController != "kctl-test" || v1.Action != "InvalidSetting" || v1.Note != "mode must be fast or slow" ||
		v1.EventTime.IsZero() || v1.DeprecatedCount != 0 || v1.DeprecatedSource.Component != "" {
		t.Errorf("written as an events.k8s.io/v1 Event (reportingController, action, note, eventTime; no deprecated fields), the server has %+v", v1)
	}
}

// EventRelated writes an events.k8s.io/v1 Event with its action and
// related object; a burst of it is one Event whose series counts it.
func TestEventRecorder_EventRelated_ActionRelatedAndSeriesOnServer(t *testing.T) {
	cfg := testConfig(t)
	o := newOnServer(t, cfg, testNamespace(t, cfg), cfg)
	made := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.cm.Namespace, Name: "made"}}
	if err := NewClient[corev1.ConfigMap](o.admin).Create(t.Context(), made); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		o.r.EventRelated(o.cm, made, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created configmap made")
	}
	o.run(t)
	ev := waitForEvent(t, o.admin, o.cm, 3)
	v1, err := NewClient[eventsv1.Event](o.admin).Get(t.Context(), ev.Namespace, ev.Name)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Action != "Create" || v1.Related == nil || v1.Related.Name != "made" || v1.Related.UID != made.UID ||
		v1.Regarding.UID != o.cm.UID || v1.Series == nil || v1.Series.Count != 3 || v1.Series.LastObservedTime.IsZero() {
		t.Errorf("the Event through events.k8s.io/v1 = %+v, want action Create, related made, series of 3", v1)
	}
}

// A server that does not serve events.k8s.io/v1: the recorder says once
// that it writes core/v1 Events, and does, a burst as one with a count.
func TestEventRecorder_ServerWithoutEventsV1_WritesCoreV1Events(t *testing.T) {
	cfg := testLoadConfig(t, controlplane.RequireFlags(t, "--runtime-config=events.k8s.io/v1=false").Kubeconfig())
	o := newOnServer(t, cfg, testNamespace(t, cfg), cfg)
	for range 4 {
		o.r.Event(o.cm, corev1.EventTypeWarning, "BackOff", "retrying")
	}
	o.run(t)
	ev := waitForEvent(t, o.admin, o.cm, 4)
	if ev.Count != 4 || ev.Source.Component != "kctl-test" || ev.Series != nil {
		t.Errorf("the Event = count %d, source %q, series %v; want a core/v1 Event with count 4", ev.Count, ev.Source.Component, ev.Series)
	}
	if n := len(o.log.lines("writing core/v1 Events from now on")); n != 1 {
		t.Errorf("the fallback was logged %d times, want once:\n%s", n, o.log.String())
	}
}

func TestEventRecorder_BurstOfTenIdentical_OneEventWithCountTenOnServer(t *testing.T) {
	cfg := testConfig(t)
	o := newOnServer(t, cfg, testNamespace(t, cfg), cfg)
	for range 10 { // buffered before the writer runs, written one by one after
		o.r.Event(o.cm, corev1.EventTypeWarning, "BackOff", "retrying")
	}
	o.run(t)
	if ev := waitForEvent(t, o.admin, o.cm, 10); ev.Reason != "BackOff" {
		t.Errorf("Event reason = %q, want BackOff", ev.Reason)
	}
}

// A program whose RBAC lets it write core/v1 Events but not
// events.k8s.io/v1 ones (a Role written before kctl moved): the recorder
// warns once, naming the grant, and writes core/v1 Events; none is lost.
func TestEventRecorder_RBACWithoutEventsV1_WritesCoreV1Events(t *testing.T) {
	admin := testConfig(t)
	ns := testNamespace(t, admin)
	grantUnprivileged(t, admin, ns, "core-events", `{"apiGroups":[""],"resources":["events"],"verbs":["create","patch","list"]}`)
	o := newOnServer(t, admin, ns, testUnprivilegedConfig(t))
	for range 2 {
		o.r.Event(o.cm, corev1.EventTypeWarning, "BackOff", "retrying")
	}
	o.run(t)
	ev := waitForEvent(t, o.admin, o.cm, 2)
	if ev.Count != 2 || ev.Series != nil {
		t.Errorf("the Event = count %d, series %v; want a core/v1 Event with count 2", ev.Count, ev.Series)
	}
	if n := len(o.log.lines("RBAC refuses events.k8s.io/v1 (grant create and patch on events in group events.k8s.io")); n != 1 {
		t.Errorf("the fallback's warning was logged %d times, want once:\n%s", n, o.log.String())
	}
	if o.log.lines("could not write Event") != nil {
		t.Errorf("an Event was dropped:\n%s", o.log.String())
	}
}

// eventCount is how many times ev happened, written as an
// events.k8s.io/v1 Event (its series, none for once) or a core/v1 one.
func eventCount(ev *corev1.Event) int32 {
	if ev.Series != nil {
		return ev.Series.Count
	}
	return max(ev.Count, 1)
}

// waitForEvent polls the API server until obj has exactly one Event, with
// count want, and returns it.
func waitForEvent(t *testing.T, conn *Conn, obj metav1.Object, want int32) *corev1.Event {
	t.Helper()
	events := NewClient[corev1.Event](conn)
	opts := ListOptions{Namespace: obj.GetNamespace(), Fields: "involvedObject.uid=" + string(obj.GetUID())}
	deadline := time.Now().Add(20 * time.Second)
	var got []*corev1.Event
	for time.Now().Before(deadline) {
		var err error
		if got, err = events.List(t.Context(), opts); err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && eventCount(got[0]) == want {
			return got[0]
		}
		time.Sleep(50 * time.Millisecond) // polling the API server, with a deadline
	}
	var counts []int32
	for _, ev := range got {
		counts = append(counts, eventCount(ev))
	}
	t.Fatalf("Events on %s/%s: counts %v, want one Event with count %d", obj.GetNamespace(), obj.GetName(), counts, want)
	return nil
}

func BenchmarkEventRecorder_Event(b *testing.B) {
	r, _, _ := testRecorder()
	done := make(chan struct{})
	go func() { // a writer that keeps the buffer empty
		for {
			select {
			case <-r.queue:
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		pods[i] = eventPod(fmt.Sprint("web-", i), fmt.Sprint("uid-", i))
	}
	i := 0
	for b.Loop() {
		r.Event(pods[i%len(pods)], corev1.EventTypeNormal, "Synced", "synced") // 1000 objects: under the flood limit
		i++
	}
}

// Issue 25, item 16: after K consecutive failures, a Warning Event on the
// object names the error.
func TestWarnAfterFailures_RecordsAWarningEventNamingTheError(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var calls atomic.Int32
	c := NewController(mgr, "warns", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		calls.Add(1)
		if cm.Name == "fine" {
			return Result{}, nil
		}
		return Result{}, errors.New("the quota is exhausted")
	})
	c.WithRateLimiter(NewRateLimiter[Key](time.Millisecond, 10*time.Millisecond, 100, 100))
	c.WarnAfterFailures(mgr.EventRecorder("warns"), 3)
	startManager(t, mgr)
	for _, name := range []string{"broken", "fine"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	events := NewClient[corev1.Event](mustConn(t, cfg))
	found := eventWithReason(t, events, ns, "ReconcileFailed")
	if found.Type != corev1.EventTypeWarning || found.InvolvedObject.Name != "broken" || found.InvolvedObject.Kind != "ConfigMap" {
		t.Errorf("Event = %s %s on %s %s, want a Warning on ConfigMap broken", found.Type, found.Reason, found.InvolvedObject.Kind, found.InvolvedObject.Name)
	}
	if !strings.Contains(found.Message, "failed 3 or more times in a row: the quota is exhausted") {
		t.Errorf("Event message = %q, want the count and the error", found.Message)
	}
	list, err := events.List(t.Context(), ListOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.InvolvedObject.Name == "fine" {
			t.Errorf("an Event about the object that reconciles fine: %s %s", e.Reason, e.Message)
		}
	}
}

// eventWithReason waits for an Event of namespace ns with reason, and
// returns it.
func eventWithReason(t *testing.T, events *Client[corev1.Event], ns, reason string) *corev1.Event {
	t.Helper()
	var found *corev1.Event
	eventually(t, "an Event "+reason, func() bool {
		list, err := events.List(t.Context(), ListOptions{Namespace: ns})
		if err != nil {
			return false
		}
		for _, e := range list {
			if e.Reason == reason {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// Issue 35, item 5: WithMaxRetries makes the n-th failure in a row
// Terminal, with a Warning Event naming it; a change of the object
// brings the key back with a fresh count.
func TestWithMaxRetries_TheNthFailureIsTerminalWithAnEvent(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	var attempts []string // "trigger attempt" of each reconcile of broken
	c := NewController(mgr, "gives-up", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if cm.Name != "broken" {
			return Result{}, nil
		}
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		attempts = append(attempts, fmt.Sprintf("%s %d", tr.Cause, tr.Attempt))
		mu.Unlock()
		return Result{}, errors.New("the quota is exhausted")
	})
	c.WithRateLimiter(NewRateLimiter[Key](time.Millisecond, 10*time.Millisecond, 100, 100))
	c.WithMaxRetries(3, mgr.EventRecorder("gives-up"))
	startManager(t, mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}}
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	found := eventWithReason(t, NewClient[corev1.Event](mustConn(t, cfg)), ns, "ReconcileGaveUp")
	wantMsg := "kctl: gave up on ConfigMap " + ns + "/broken after 3 failures in a row (WithMaxRetries(3)): the quota is exhausted"
	if found.Type != corev1.EventTypeWarning || found.InvolvedObject.Name != "broken" || found.Message != wantMsg {
		t.Errorf("Event = %s %s on %s: %q, want a Warning on broken: %q", found.Type, found.Reason, found.InvolvedObject.Name, found.Message, wantMsg)
	}
	logs.linesEventually(t, "not retrying (terminal)", 1)
	// Given up: no fourth attempt. A change brings the key back, counted afresh.
	cm.Data = map[string]string{"quota": "raised"}
	if err := cms.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three attempts after the update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) >= 6
	})
	logs.linesEventually(t, "not retrying (terminal)", 2)
	mu.Lock()
	defer mu.Unlock()
	first := attempts[0][:strings.Index(attempts[0], " ")] // initial or created
	want := []string{first + " 1", "retry 2", "retry 3", "updated 1", "retry 2", "retry 3"}
	if !slices.Equal(attempts, want) {
		t.Errorf("attempts (trigger, attempt) = %q, want %q: given up at the third failure, and again after the update", attempts, want)
	}
}

func TestWithMaxRetries_BelowOneIsAnErrorFromStart(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	c := NewController(mgr, "zero", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	c.WithMaxRetries(0, nil)
	err := mgr.Start(startCheckCtx(t))
	if err == nil || !strings.Contains(err.Error(), "WithMaxRetries(0) must be at least 1") {
		t.Errorf("Start = %v, want the count named", err)
	}
}
