package webhook

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWebhooks_HeapOfConcurrentMaximalReviews measures, when
// KCTL_WEBHOOK_HEAP_N is set (run it alone: it reads this process's
// heap), the live heap held while that many maximal reviews (an UPDATE of
// a ConfigMap of 3.4 MiB, 6.9 MiB in all) are sent at once to a server
// with the default MaxInFlight, and logs it with how many were served and
// how many refused.
func TestWebhooks_HeapOfConcurrentMaximalReviews(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KCTL_WEBHOOK_HEAP_N"))
	if n <= 0 {
		t.Skip("set KCTL_WEBHOOK_HEAP_N to measure the heap of that many concurrent maximal reviews")
	}
	f := newWebhookFixture(t)
	v := newHeldValidator(t)
	Validate(f.hooks, v.validate)
	f.start(t)
	data := strings.Repeat("x", 3400<<10)
	object := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held-big"},"data":{"big":%q}}`, data)
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE",` +
		`"name":"held-big","namespace":"default","object":` + object + `,"oldObject":` + object + `}}`
	client := webhookClient(f.ca)
	client.Timeout = 5 * time.Minute // a loaded machine is slow to send them all
	url := "https://" + f.addr + "/validate--v1-configmap?timeout=30s"
	answers := make(chan reviewAnswer, n)
	heapInuse := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heapInuse()
	// peak samples the heap in use (garbage too) until sampled is closed.
	var peak uint64
	sampled, sampling := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampling)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-sampled:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for range n {
		go func() { answers <- postReview(context.Background(), client, url, body) }()
	}
	entered, refused, failed := 0, 0, 0
	deadline := time.After(5 * time.Minute)
	for entered+refused+failed < n {
		select {
		case <-v.entered:
			entered++
		case a := <-answers:
			switch {
			case a.err != nil:
				failed++
			case a.code == 429:
				refused++
			default:
				t.Fatalf("an answer before release: %d %.200s", a.code, a.body)
			}
		case <-deadline:
			t.Fatalf("after 5m: %d served, %d refused, %d failed of %d", entered, refused, failed, n)
		}
	}
	close(sampled)
	<-sampling
	held := heapInuse()
	t.Logf("%d concurrent maximal reviews (%d bytes each): %d in the function, %d refused 429, %d failed; "+
		"heap in use %d MiB before, at most %d MiB while sending (+%d MiB), %d MiB live once all are held or refused (+%d MiB)",
		n, len(body), entered, refused, failed, before>>20, peak>>20, (peak-before)>>20, held>>20, (held-before)>>20)
	v.releaseAll()
	for range entered {
		if a := <-answers; !a.allowed() {
			t.Errorf("a held review = %d %.200s %v, want allowed", a.code, a.body, a.err)
		}
	}
}
