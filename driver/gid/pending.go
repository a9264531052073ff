package gid

import (
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Which slots admission counts as free.
//
// The kernel puts an address's entry in the lowest slot that is free to
// it, and two kinds of slot that read empty in sysfs are not:
//
//   - the reserved default slots, one per RoCE type of the port (0-1 on
//     mlx5, 0 on rxe), which only ever hold the default GIDs;
//   - the slot of a deleted entry that something still holds (a QP's
//     address vector, an address handle, an rdma_cm ID): the kernel marks
//     it pending-delete and keeps it until the last holder lets go, while
//     sysfs already reads it as the zero GID. A container disconnected
//     from a network while its workload runs leaves such slots behind for
//     as long as the workload keeps its QPs.
//
// The first are known from the port's RoCE types. The second cannot be
// read; they show in what the kernel does: a new entry that appears above
// a slot that read empty before and still does was not put there because
// that slot was not free. Admission counts such a slot as taken until the
// kernel puts an entry there, or until skipMemory has passed since the
// kernel last passed over it: the holder may have let go meanwhile, and
// nothing in sysfs says so, so a slot is not kept out of the count for
// ever on old evidence (if it is still held, the next add passes over it
// again and it is counted as taken again).

// skipMemory is how long a slot the kernel passed over counts as taken
// without new evidence.
const skipMemory = 2 * time.Minute

// passedOver returns the slots the kernel passed over, as the change from
// the read prev to the read cur shows (read at now), added to those of old
// that still read empty and are younger than skipMemory. Tables of
// different sizes (or not read slot by slot) teach nothing.
func passedOver(prev, cur []string, old map[int]time.Time, now time.Time) map[int]time.Time {
	var out map[int]time.Time
	mark := func(i int, at time.Time) {
		if out == nil {
			out = map[int]time.Time{}
		}
		out[i] = at
	}
	for i, at := range old {
		if i < len(cur) && cur[i] == "" && now.Sub(at) < skipMemory {
			mark(i, at)
		}
	}
	if prev == nil || len(prev) != len(cur) {
		return out
	}
	top := -1 // the highest slot that took a new entry
	for j := len(cur) - 1; j >= 0; j-- {
		if prev[j] == "" && cur[j] != "" {
			top = j
			break
		}
	}
	for i := 0; i < top; i++ {
		if prev[i] == "" && cur[i] == "" {
			mark(i, now)
		}
	}
	return out
}

// freeFor counts the slots of table the kernel would give an address's
// entry: the empty ones past the reserved default slots (one per RoCE
// type), less those it passed over (passed, read at now); passed counts
// those. A table not read slot by slot is counted by its size.
func freeFor(table rdma.GIDTable, types int, skipped map[int]time.Time, now time.Time) (free, passed int) {
	if table.Slots == nil {
		return max(table.Size-table.Used, 0), 0
	}
	for i := types; i < len(table.Slots); i++ {
		if table.Slots[i] != "" {
			continue
		}
		if at, ok := skipped[i]; ok && now.Sub(at) < skipMemory {
			passed++
			continue
		}
		free++
	}
	return free, passed
}
