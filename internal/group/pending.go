package group

import (
	"context"
	"sync"
	"time"
)

// Task is a named goroutine's work whose context is given when it runs:
// what a kctl Runnable is to a Group.
type Task struct {
	Name string
	// Busy, if not nil, says what Run is doing when a Wait gives up on it.
	Busy func() string
	Run  func(ctx context.Context) error
}

// goTask runs t.Run(ctx) in g.
func (g *Group) goTask(ctx context.Context, t Task) {
	g.Go(t.Name, t.Busy, func() error { return t.Run(ctx) })
}

// Pending runs tasks in a Group once it is started: those added before
// Start wait for it, those added after run at once, all with Start's
// context (a kctl Manager's runnables of every replica, and its Event
// writers). The zero value is ready to use. Safe for concurrent use.
type Pending struct {
	mu    sync.Mutex
	tasks []Task          // added before Start
	g     *Group          // Start's; nil before Start
	ctx   context.Context // Start's
}

// Go runs t in the Group once Start has been called: at once if it has.
func (p *Pending) Go(t Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.g == nil {
		p.tasks = append(p.tasks, t)
		return
	}
	p.g.goTask(p.ctx, t)
}

// Start runs in g, with ctx, every task added so far and every one
// added later. Call it once.
func (p *Pending) Start(ctx context.Context, g *Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.g = g
	p.ctx = ctx
	for _, t := range p.tasks {
		g.goTask(ctx, t)
	}
	p.tasks = nil
}

// Len is the number of tasks waiting for Start.
func (p *Pending) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tasks)
}

// Terms runs a kctl Manager's leader-only tasks in its leadership terms:
// every task added, in the current term if there is one, and again in
// every later term. A term hands its tasks two contexts: each task is
// made for the term from its lease context (kctl's Runnable.inTerm) and
// run with its leader context. The zero value is ready to use. Safe for
// concurrent use.
type Terms struct {
	mu    sync.Mutex
	tasks []func(leaseCtx context.Context) Task
	// term runs the current term's tasks; nil while not leading.
	term   *Group
	leader context.Context // the current term's leader context
	lease  context.Context // and its lease context
}

// Add keeps task for every term, and runs it in the current one, if any.
func (ts *Terms) Add(task func(leaseCtx context.Context) Task) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.tasks = append(ts.tasks, task)
	if ts.term != nil {
		ts.term.goTask(ts.leader, task(ts.lease))
	}
}

// Begin begins a term: it runs every task, and every one added until
// End, in g with leaderCtx.
func (ts *Terms) Begin(g *Group, leaderCtx, leaseCtx context.Context) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.term = g
	ts.leader = leaderCtx
	ts.lease = leaseCtx
	for _, task := range ts.tasks {
		g.goTask(leaderCtx, task(leaseCtx))
	}
}

// End ends the term: tasks added from now on wait for the next one.
func (ts *Terms) End() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.term = nil
	ts.leader = nil
	ts.lease = nil
}

// Current is the current term's Group, or nil while not leading.
func (ts *Terms) Current() *Group {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.term
}

// Last runs the goroutines a kctl Manager stops after the rest (its Event
// writers, which write what the rest recorded): in a Group of their own,
// with a context detached from the Manager's that ends only at Stop. Those
// added before Start wait for it, those added after run at once. The zero
// value is ready to use. Go is safe for concurrent use; Stop, Wait and
// Err are for Start's caller, after Start.
type Last struct {
	pending Pending
	// g and stop are Start's.
	g    *Group
	stop context.CancelFunc
}

// Go runs t once Start has been called: at once if it has.
func (l *Last) Go(t Task) { l.pending.Go(t) }

// Start runs every task added so far, and every one added later, with a
// context that keeps ctx's values but ends only at Stop, in a Group whose
// first error cancel receives. Call it once, then Stop.
func (l *Last) Start(ctx context.Context, cancel context.CancelCauseFunc) {
	detached := context.WithoutCancel(ctx)
	lastCtx, stop := context.WithCancel(detached)
	l.g = New(cancel)
	l.stop = stop
	l.pending.Start(lastCtx, l.g)
}

// Stop ends the tasks' context. It may be called more than once.
func (l *Last) Stop() { l.stop() }

// Wait is the Group's Wait: see Group.Wait.
func (l *Last) Wait(stop context.Context, by func() time.Time) []string {
	return l.g.Wait(stop, by)
}

// Err is the first error a task returned.
func (l *Last) Err() error { return l.g.Err() }
