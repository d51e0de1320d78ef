package kctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// blackhole is a fault-injecting TCP proxy on loopback in front of the real
// kube-apiserver (a real server cannot go silent on demand). While up it
// relays bytes both ways. silence makes every connection open at the time,
// and every one accepted until restore, silent for good: what it reads is
// dropped, and nothing, not even a close, reaches the other side, as when
// a dead NAT entry or a stuck proxy eats a connection. A client closing its
// side still closes the proxy's.
type blackhole struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	silent   bool
	conns    map[*relay]bool
	wg       sync.WaitGroup
}

// relay is one client connection and its connection to the server.
type relay struct {
	client, server net.Conn
	// silenced: drop what either side sends.
	silenced atomic.Bool
}

// newBlackhole starts a proxy to cfg's server and returns a copy of cfg
// that reaches the server through it, speaking HTTP/1.1 only (its TLS
// offers no h2, so HTTP/2's connection health check is out of play).
func newBlackhole(t *testing.T, cfg *rest.Config) (*blackhole, *rest.Config) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, upstream: u.Host, conns: map[*relay]bool{}}
	b.wg.Go(b.accept)
	t.Cleanup(b.close)
	proxied := rest.CopyConfig(cfg)
	proxied.Host = "https://" + ln.Addr().String()
	proxied.NextProtos = []string{"http/1.1"}
	return b, proxied
}

func (b *blackhole) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.upstream)
		if err != nil {
			c.Close()
			continue
		}
		r := &relay{client: c, server: s}
		b.mu.Lock()
		r.silenced.Store(b.silent)
		b.conns[r] = true
		b.mu.Unlock()
		b.wg.Go(func() { b.pipe(r, c, s, true) })
		b.wg.Go(func() { b.pipe(r, s, c, false) })
	}
}

// pipe copies from src to dst until src ends; fromClient says which way.
func (b *blackhole) pipe(r *relay, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.silenced.Load() {
			dst.Write(buf[:n])
		}
		if err == nil {
			continue
		}
		// The server's end is not passed on through the silence.
		if fromClient || !r.silenced.Load() {
			r.client.Close()
			r.server.Close()
			b.mu.Lock()
			delete(b.conns, r)
			b.mu.Unlock()
		}
		return
	}
}

// silence makes the open connections, and those accepted until restore, silent.
func (b *blackhole) silence() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silent = true
	for r := range b.conns {
		r.silenced.Store(true)
	}
}

// restore relays the connections accepted from now on; silent ones stay so.
func (b *blackhole) restore() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silent = false
}

// openSilent is the number of silent connections the client has not closed.
func (b *blackhole) openSilent() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for r := range b.conns {
		if r.silenced.Load() {
			n++
		}
	}
	return n
}

func (b *blackhole) close() {
	b.ln.Close()
	b.mu.Lock()
	for r := range b.conns {
		r.client.Close()
		r.server.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// The proxy speaks HTTP/1.1 to the client: the premise of the tests below.
func TestBlackhole_ProxiedConnection_IsHTTP1(t *testing.T) {
	_, cfg := newBlackhole(t, testConfig(t))
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+"/version", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Fatalf("through the proxy: %s %s, want HTTP/1.1 200", resp.Proto, resp.Status)
	}
}

// A watch over HTTP/1.1 whose connection goes silent is ended by the client
// a little past its timeoutSeconds (shortened here), and once the path is
// back the informer lists and watches again: every change made meanwhile
// reaches the cache.
func TestInformer_SilentHTTP1Connection_WatchEndsAndCacheRecovers(t *testing.T) {
	checkNoCacheLeaks(t)
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	cfg.Timeout = 2 * time.Second // the lists while silent
	conn := mustConn(t, cfg)
	logs, logger := newCacheLogs()
	c, inf := configMapInformer(t, conn, ns, logger)
	inf.watchFor = 2 * time.Second // before the informer runs
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	hole.silence()
	cms := NewClient[corev1.ConfigMap](mustConn(t, direct))
	const n = 5
	for i := range n {
		if err := cms.Create(t.Context(), newCM(ns, fmt.Sprint("cm-", i), "0")); err != nil {
			t.Fatal(err)
		}
	}
	logs.linesEventually(t, "still silent", 1)
	hole.restore()
	eventually(t, "the changes made while silent in the cache", func() bool {
		return len(mustList(t, inf, ListOptions{})) == n
	})
	eventually(t, "the silent connections closed", func() bool { return hole.openSilent() == 0 })
}

// A write into a silent HTTP/1.1 connection fails after the Conn's timeout
// (rest.Config.Timeout) instead of holding its caller.
func TestClient_WriteIntoSilentHTTP1Connection_FailsAfterTheTimeout(t *testing.T) {
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	const timeout = 2 * time.Second
	cfg.Timeout = timeout
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	if err := cms.Create(t.Context(), newCM(ns, "before", "0")); err != nil {
		t.Fatal(err) // the connection is open, and kept alive
	}
	hole.silence()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := cms.Create(ctx, newCM(ns, "into-the-silence", "0"))
	took := time.Since(start)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("create into a silent connection: err %v after %v, want the Conn's timeout (%v)", err, took, timeout)
	}
	if !strings.Contains(err.Error(), "kctl: POST") || !isTimeout(err) {
		t.Errorf("err = %v, want a timeout naming the request", err)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("the create failed after %v, want a little over %v", took, timeout)
	}
	hole.restore()
	if err := cms.Create(t.Context(), newCM(ns, "after", "0")); err != nil {
		t.Errorf("create after the path came back: %v", err)
	}
}

// isTimeout reports whether err is a client timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// A watch's own bound is a little past its timeoutSeconds (the other
// requests' 70 s is internal/transport's TestNew_NoTimeout_...).
func TestWatchBound_IsALittlePastTheTimeoutItAsks(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{time.Second, 2100 * time.Millisecond},
		{5 * time.Minute, 5*time.Minute + 31*time.Second},
		{10 * time.Minute, 10*time.Minute + 31*time.Second},
	} {
		if got := watchBound(c.timeout); got != c.want {
			t.Errorf("watchBound(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}
