package readahead

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
)

// Pages are used in order, each once, and never more than ahead of them
// are fetched ahead of the one about to be used, whether fetch calls
// early or not.
func TestPages_InOrder_AtMostAheadFetchedAndUnused(t *testing.T) {
	for _, callEarly := range []bool{true, false} {
		const n, ahead = 20, 2
		var unused, most atomic.Int32
		fetch := func(ctx context.Context, token string, early func(string)) (int, string, error) {
			page := 0
			if token != "" {
				page, _ = strconv.Atoi(token)
			}
			next := ""
			if page+1 < n {
				next = strconv.Itoa(page + 1)
			}
			if callEarly {
				early(next)
			}
			u := unused.Add(1)
			for m := most.Load(); u > m && !most.CompareAndSwap(m, u); m = most.Load() {
			}
			return page, next, nil
		}
		var got []int
		err := Pages(t.Context(), ahead, fetch, func(p int) {
			unused.Add(-1)
			got = append(got, p)
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
			t.Errorf("early %v: used %v, want 0..19 in order", callEarly, got)
		}
		if m := most.Load(); m > ahead+1 {
			t.Errorf("early %v: %d pages fetched and unused at once, want at most %d and the next", callEarly, m, ahead)
		}
	}
}

// A failing fetch ends Pages with its error, and the pages asked for
// early are canceled and waited for.
func TestPages_AFetchFails_ReturnsItsErrorAndCancelsTheRest(t *testing.T) {
	boom := errors.New("boom")
	var started, ended atomic.Int32
	fetch := func(ctx context.Context, token string, early func(string)) (string, string, error) {
		started.Add(1)
		defer ended.Add(1)
		switch token {
		case "":
			early("1")
			return "0", "1", nil
		case "1":
			early("2")
			return "", "", boom
		default:
			<-ctx.Done() // never used: canceled
			return "", "", ctx.Err()
		}
	}
	err := Pages(t.Context(), 2, fetch, func(string) {})
	if !errors.Is(err, boom) {
		t.Fatalf("Pages = %v, want boom", err)
	}
	if n, m := ended.Load(), started.Load(); n != m {
		t.Errorf("%d of %d fetches had ended when Pages returned, want all", n, m)
	}
}
