package kctl

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// benchQueue is what the benchmarks use of both queues.
type benchQueue interface {
	Add(k string)
	AddAfter(k string, d time.Duration)
	Get() (k string, shutdown bool)
	Done(k string)
	Len() int
	ShutDown()
}

// queueBenchKeys are 1000 keys shaped like namespace/name.
var queueBenchKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%10, i)
	}
	return keys
}()

// BenchmarkQueue compares kctl's Queue with client-go's rate-limiting
// workqueue (with DefaultTypedControllerRateLimiter), case by case, each over
// the same 1000 keys; kctl and client-go run one after the other per case:
//
//	AddGetDone    one goroutine: Add, Get, Done (ns per round)
//	Contended4x2  4 producers Add random keys, 2 consumers Get and Done (ns per Add)
//	AddAfter      a worker requeues each key it gets: Get, AddAfter(key, 1-64µs),
//	              Done; the timer makes the keys ready again (ns per round)
//
// Besides ns/op it reports cpu-ns/op, the CPU time of the whole process (all
// goroutines, the runtime included) per op: on a shared machine wall time
// also counts the time other processes hold the CPUs.
func BenchmarkQueue(b *testing.B) {
	impls := []struct {
		name string
		make func() benchQueue
	}{
		{"kctl", func() benchQueue { return NewQueue(QueueOptions[string]{}) }},
		{"clientgo", func() benchQueue {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		}},
	}
	cases := []struct {
		name string
		run  func(b *testing.B, q benchQueue)
	}{
		{"AddGetDone", benchAddGetDone},
		{"Contended4x2", benchContended},
		{"AddAfter", benchAddAfter},
	}
	for _, c := range cases {
		for _, impl := range impls {
			b.Run(impl.name+"/"+c.name, func(b *testing.B) {
				q := impl.make()
				defer q.ShutDown()
				b.ReportAllocs()
				c.run(b, q)
			})
		}
	}
}

// processCPUTime is the CPU time the process has used so far, all threads.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportProcessCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPUTime()-start)/float64(b.N), "cpu-ns/op")
}

func benchAddGetDone(b *testing.B, q benchQueue) {
	for i := range 2000 { // grow maps and buffers first
		q.Add(queueBenchKeys[i%1000])
		k, _ := q.Get()
		q.Done(k)
	}
	start := processCPUTime()
	for i := 0; b.Loop(); i++ {
		q.Add(queueBenchKeys[i%1000])
		k, _ := q.Get()
		q.Done(k)
	}
	reportProcessCPU(b, start)
}

func benchContended(b *testing.B, q benchQueue) {
	var gets atomic.Int64
	var consumers, producers sync.WaitGroup
	for range 2 {
		consumers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				gets.Add(1)
				q.Done(k)
			}
		})
	}
	b.ResetTimer()
	start := processCPUTime()
	for p := range 4 {
		producers.Go(func() {
			x := uint32(p*7919 + 1) // xorshift: a random key of 1000
			for i := p; i < b.N; i += 4 {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				q.Add(queueBenchKeys[x%1000])
			}
		})
	}
	producers.Wait()
	for q.Len() > 0 { // the consumers catch up
		runtime.Gosched()
	}
	b.StopTimer()
	reportProcessCPU(b, start)
	q.ShutDown()
	consumers.Wait()
	b.ReportMetric(float64(gets.Load())/float64(b.N), "gets/op")
}

func benchAddAfter(b *testing.B, q benchQueue) {
	for _, k := range queueBenchKeys {
		q.Add(k)
	}
	start := processCPUTime()
	for i := 0; b.Loop(); i++ {
		k, _ := q.Get()
		q.AddAfter(k, time.Duration(1+i%64)*time.Microsecond)
		q.Done(k)
	}
	reportProcessCPU(b, start)
}
