package connlimit

import (
	"math"
	"slices"
	"testing"
)

// The caps of the daemon's listeners, together with what it keeps for its
// files and sockets, fit under its limit on file descriptors, so that a
// flood of one listener cannot make accept fail with EMFILE on the other.
func TestCapsFitTheFileLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		nofile uint64
		want   []int
		caps   []int
	}{
		{"one listener, no limit", math.MaxUint64, []int{1024}, []int{1024}},
		{"one listener, room to spare", 1 << 20, []int{1024}, []int{1024}},
		{"one listener, exactly room", 1024 + Reserve, []int{1024}, []int{1024}},
		{"one listener, systemd's soft 1024", 1024, []int{1024}, []int{1024 - Reserve}},
		{"one listener, tiny limit", 100, []int{1024}, []int{64}},
		{"two listeners, no limit", math.MaxUint64, []int{1024, 32}, []int{1024, 32}},
		{"two listeners, exactly room", 1024 + 32 + Reserve, []int{1024, 32}, []int{1024, 32}},
		{"two listeners, one short", 1024 + 32 + Reserve - 1, []int{1024, 32}, []int{1023, 32}},
		{"two listeners, systemd's soft 1024", 1024, []int{1024, 32}, []int{1024 - Reserve - 32, 32}},
		{"two listeners, tiny limit", 100, []int{1024, 32}, []int{64, 32}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Caps(c.nofile, c.want...); !slices.Equal(got, c.caps) {
				t.Fatalf("Caps(%d, %v) = %v, want %v", c.nofile, c.want, got, c.caps)
			}
		})
	}
	for nofile := uint64(Reserve + minCap + 32); nofile < 3000; nofile++ {
		caps := Caps(nofile, 1024, 32)
		if sum := uint64(caps[0] + caps[1]); sum+Reserve > nofile {
			t.Fatalf("RLIMIT_NOFILE %d: caps %v and %d reserved exceed it", nofile, caps, Reserve)
		}
	}
}
