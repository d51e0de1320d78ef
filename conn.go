package kctl

// Conn, one connection to an API server: making it (NewConn, from a
// configuration LoadConfig finds, on floor 2), and sending a request on it
// (do, by internal/transport: rate limited, bounded, and retried after
// 429s).

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/kctl-dev/kctl/internal/discovery"
	"github.com/kctl-dev/kctl/internal/transport"
	"k8s.io/client-go/rest"
)

// Conn is one connection to an API server, shared by the Clients made from
// it: client-go's HTTP client (TLS, authentication, exec plugins), the user
// agent "kctl/<version> (<os>/<arch>)" unless cfg sets one, and a rate limit
// of cfg.QPS and cfg.Burst (200 and 500 when 0; a negative QPS disables it).
// Every request is bounded on the client, so that a silent network (a
// dead connection behind a proxy, where HTTP/2's health check does not
// reach) fails it instead of holding it forever: a watch a little past the
// timeoutSeconds it asks for (see Client.watch), any other request, its
// answer's body included, by cfg.Timeout (70 s when not above 0). A 429
// Too Many Requests is retried after its Retry-After, at most 10 times.
// A Manager's own Conn counts its requests on the Manager's metrics page
// (rest_client_requests_total, rest_client_request_duration_seconds); one
// you make counts nothing. The server's warnings (the Warning header of an
// answer: a deprecated API, an unknown field in a write) are logged at
// level WARN once per distinct text, as client-go logs them: a Manager's
// to Options.Logger, one you make to slog.Default(). It remembers the
// last 1024 distinct texts (by a 64-bit hash: 46 KB at most, measured);
// one forgotten is logged again if it comes back. Make one with NewConn;
// the zero value is unusable. A Conn is safe for concurrent use and holds
// no goroutines.
type Conn struct {
	// transport sends the requests: limits, bounds, retries, warnings.
	transport *transport.Client
	// discovery is what the server serves, for declared types' checks.
	discovery discovery.Cache
	// requests counts a Manager's rest_client_* series, in do and discoveryGet:
	// NewManager sets it (countInMetrics, constructors.go); nil: not counted.
	requests transport.Observer
}

// NewConn makes a Conn from cfg (which it does not modify).
func NewConn(cfg *rest.Config) (*Conn, error) {
	t, err := transport.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Conn{transport: t}, nil
}

// logWarningsTo makes c log the server's warnings to log.
func (c *Conn) logWarningsTo(log *slog.Logger) {
	c.transport.LogWarningsTo(log)
}

// discoveryGet reads a discovery document on c (internal/discovery).
func (c *Conn) discoveryGet() discovery.Fetch {
	return discovery.Getter(c.transport, c.requests)
}

// request is one call on a Client's resource; verb names it in errors
// ("update status of"). A list call has no name; a create has none in its path.
type request struct {
	verb        string
	method      string
	namespace   string
	name        string
	sub         string
	list        bool
	query       url.Values
	body        []byte
	contentType string
	// path and accept are set by send.
	path   string
	accept string
}

// do sends r (transport.Client.Do): it waits for the rate limiter and
// retries 429s (and, for reads, 5xx with Retry-After). The caller closes
// the response body. Each attempt is counted in c.requests, and the
// request, but for a watch, is timed until its answer's body is closed.
func (c *Conn) do(ctx context.Context, r request) (*http.Response, error) {
	tr := transport.Request{
		Method:      r.method,
		Path:        r.path,
		Query:       r.query,
		Body:        r.body,
		ContentType: r.contentType,
		Accept:      r.accept,
	}
	return c.transport.Do(ctx, tr, c.requests)
}
