package kctl

// An extra (sharding): does the server serve ListOptions.ShardSelector?

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/kctl-dev/kctl/internal/shardhash"
)

// shardProbeTimeout bounds one probe of the shard selector.
const shardProbeTimeout = 10 * time.Second

// probeShardSelector asks the server, with one list of at most one object
// of res in every namespace, whether it honours a shard selector on res:
// it sends the selector of the whole hash space, which selects everything,
// and reports true if and only if the answer echoes it in
// metadata.shardInfo. kube-apiserver 1.36 does with the feature gate
// ShardedListAndWatch on; without the gate, or before 1.36, the server
// ignores the parameter and lists, and the answer is false. An aggregated
// API or another server may differ, hence one probe per resource.
//
// It never sends an invalid selector: kube-apiserver 1.36.3 answers one
// with 500, which would read as a failing server. It takes at most
// shardProbeTimeout; an error (the server's answer, a 403 naming the
// missing list permission) means it could not tell.
func probeShardSelector(
	ctx context.Context,
	conn *Conn,
	res Resource,
) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, shardProbeTimeout)
	defer cancel()
	sel := shardhash.Selector(shardhash.FieldUID, shardhash.Range{})
	q := url.Values{}
	q.Set("limit", "1")
	q.Set("shardSelector", sel)
	r := request{
		verb:   "probe the shard selector on",
		method: http.MethodGet,
		list:   true,
		query:  q,
		path:   listPath(res),
		accept: "application/json",
	}
	resp, err := conn.do(ctx, r)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: reading the answer: %w", res, err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: the server answered %s: %s (the replica "+
			"needs list on %s in every namespace)",
			res, resp.Status, body, res.Plural)
	}
	var list struct {
		Metadata struct {
			ShardInfo *struct {
				Selector string `json:"selector"`
			} `json:"shardInfo"`
		} `json:"metadata"`
	}
	err = json.Unmarshal(body, &list)
	if err != nil {
		return false, fmt.Errorf("kctl: probe the shard selector "+
			"on %s: decoding the answer: %w", res, err)
	}
	info := list.Metadata.ShardInfo
	return info != nil && info.Selector == sel, nil
}

// listPath is the path of a list of res in every namespace.
func listPath(res Resource) string {
	p := "/api/" + res.Version
	if res.Group != "" {
		p = "/apis/" + res.Group + "/" + res.Version
	}
	return p + "/" + res.Plural
}
