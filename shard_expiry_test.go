package kctl

import (
	"testing"
	"time"
)

// nextExpiry is when a peer's Lease, live at the last list, expires by
// this member's clock: LeaseDuration after it first saw the Lease's
// current version. An expiry that passed after the last list is still
// returned (a look must judge it at once); once a list has judged the
// Lease expired it is not; the member's own Lease never counts.
func TestShardMembers_NextExpiry_FirstPeerLeaseNotYetJudged(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, clock := testMember(t, ns, "g", "a")
	b, bClock := testMember(t, ns, "g", "b")
	mustJoin(t, a)
	wantLive(t, a, "a")
	if got := a.nextExpiry(); !got.IsZero() {
		t.Fatalf("alone: nextExpiry() = %v, want zero", got)
	}
	mustJoin(t, b)
	wantLive(t, a, "a", "b")
	first := clock.now()
	if got, want := a.nextExpiry(), first.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("nextExpiry() = %v, want the first sight of b's Lease + 3s = %v", got, want)
	}

	clock.add(time.Second)
	bClock.add(time.Second)
	if err := b.renew(t.Context(), nil); err != nil {
		t.Fatalf("b: renew: %v", err)
	}
	wantLive(t, a, "a", "b")
	renewed := clock.now()
	if got, want := a.nextExpiry(), renewed.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("after b renewed: nextExpiry() = %v, want %v", got, want)
	}

	clock.add(4 * time.Second) // past the expiry, not listed since
	if got, want := a.nextExpiry(), renewed.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("expiry passed, not judged: nextExpiry() = %v, want %v", got, want)
	}
	wantLive(t, a, "a")
	if got := a.nextExpiry(); !got.IsZero() {
		t.Fatalf("b judged expired: nextExpiry() = %v, want zero", got)
	}
}
