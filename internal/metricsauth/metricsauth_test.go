package metricsauth

import (
	"testing"
	"time"
)

// TestVerdicts_Full_EvictsTheLeastRecentlyUsedOne: a full cache makes room
// for one verdict by evicting one, the one used least recently, and keeps
// the others (issue 33: it was cleared whole).
func TestVerdicts_Full_EvictsTheLeastRecentlyUsedOne(t *testing.T) {
	c := newVerdicts(3)
	key := func(i byte) [32]byte { return [32]byte{i} }
	for i := range byte(3) {
		c.put(key(i+1), verdict{code: 200 + int(i)})
	}
	c.get(key(1)) // 2 is now the least recently used
	c.put(key(4), verdict{code: 401})
	c.put(key(3), verdict{code: 403}) // a new verdict for a kept key takes no room
	for i, want := range []int{0, 200, 0, 403, 401} {
		v, found := c.get(key(byte(i)))
		if found != (want != 0) || v.code != want {
			t.Errorf("get(key %d) = %d, %v; want %d, %v", i, v.code, found, want, want != 0)
		}
	}
}

// TestVerdicts_Limits_KeepEveryVerdictForItsTTL: fewer tokens can be
// reviewed within a verdict's TTL than the cache holds, so a verdict is
// never evicted within its TTL.
func TestVerdicts_Limits_KeepEveryVerdictForItsTTL(t *testing.T) {
	inTTL := ReviewBurst + ReviewRate*int(VerdictTTL/time.Second)
	if inTTL >= MaxVerdicts {
		t.Errorf("%d tokens can be reviewed within a verdict's TTL of %v, the cache holds %d: a flood evicts verdicts early", inTTL, VerdictTTL, MaxVerdicts)
	}
}
