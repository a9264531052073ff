package gid

import (
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// snapshot is the last read of a port's GID table.
type snapshot struct {
	at    time.Time // when the read began
	full  time.Time // when the last read of every slot began
	table rdma.GIDTable
	// skipped are the empty-reading slots the kernel passed over, and when
	// it last did (see pending.go).
	skipped map[int]time.Time
}

// How fresh a GID table must be (see table).
type tableRead int

const (
	// readCached accepts a snapshot up to MaxAge old; older, it reads
	// what may have changed (readChanges).
	readCached tableRead = iota
	// readChanges reads the lowest free slots and the slots of entries
	// known to be going, or every slot when the last full read is
	// fullEvery old.
	readChanges
	// readFull reads every slot.
	readFull
)

// defaultFullEvery bounds how long a table read only in part (readChanges)
// may miss a change elsewhere: an entry the kernel removed without the
// Tracker knowing (an address removed by hand, a container gone without
// Leave), or an entry added where such an entry was. A watch that has
// waited slowWatch polls reads every slot at most once per slowWatch polls
// too, and every refusal and every timeout is decided on a full read: a
// container's start never waits on a stale view for long.
const (
	defaultFullEvery = 30 * time.Second
	slowWatch        = 10
)

// minFreeLook is how many of the lowest free slots a partial read always
// looks at: the kernel puts new entries there.
const minFreeLook = 8

// Read reads every slot of port p's table (and keeps it as the port's
// snapshot).
func (t *Tracker) Read(p Port) (rdma.GIDTable, error) {
	table, _, _, err := t.table(p, readFull, 0, 0)
	return table, err
}

// table returns the GID table of port p and when its read began; full
// reports whether every slot was read then. Reads of the tables are
// serialized (not under t.mu) and each one starts from the last. With
// MaxAge 0 every read is a full one: the table is exact at every call.
// more is how many new entries the caller expects (how many free slots to
// look at beyond the few always read); a partial read becomes a full one
// when the last full read is fullAge old (0: t.fullEvery).
func (t *Tracker) table(p Port, how tableRead, more int, fullAge time.Duration) (table rdma.GIDTable, at time.Time, full bool, err error) {
	table, at, full, fresh, err := t.readTable(p, how, more, fullAge)
	if err == nil && fresh {
		t.checkDrift(p, table, at)
	}
	return table, at, full, err
}

// readTable is table without the drift check; fresh reports whether it
// read sysfs (not a cached snapshot).
func (t *Tracker) readTable(p Port, how tableRead, more int, fullAge time.Duration) (table rdma.GIDTable, at time.Time, full, fresh bool, err error) {
	if fullAge <= 0 {
		fullAge = t.fullEvery
	}
	if t.maxAge <= 0 {
		how = readFull
	}
	t.readMu.Lock()
	defer t.readMu.Unlock()
	t.mu.Lock()
	snap, ok := t.tables[p]
	going := t.going[p]
	t.mu.Unlock()
	now := time.Now()
	if ok && how == readCached && now.Sub(snap.at) < t.maxAge {
		return snap.table, snap.at, false, false, nil
	}
	if !ok || how == readFull || snap.table.Slots == nil || now.Sub(snap.full) >= fullAge {
		if table, err = t.sys.Table(p.HCA, p.Port); err != nil {
			return table, now, false, false, err
		}
		keepText(table.Slots, snap.table.Slots)
		t.mu.Lock()
		t.tables[p] = snapshot{at: now, full: now, table: table, skipped: passedOver(snap.table.Slots, table.Slots, snap.skipped, now)}
		delete(t.going, p)
		t.mu.Unlock()
		return table, now, true, true, nil
	}
	t.mu.Lock()
	idx := snap.table.FreeSlots(minFreeLook + more)
	for i := range going {
		idx = append(idx, i)
	}
	t.mu.Unlock()
	if table, err = t.sys.Refresh(p.HCA, p.Port, snap.table, idx); err != nil {
		return table, now, false, false, err
	}
	t.mu.Lock()
	t.tables[p] = snapshot{at: now, full: snap.full, table: table, skipped: passedOver(snap.table.Slots, table.Slots, snap.skipped, now)}
	for i := range going {
		if i >= len(table.Slots) || table.Slots[i] == "" {
			delete(t.going[p], i)
		}
	}
	t.mu.Unlock()
	return table, now, false, true, nil
}

// entriesGoing has partial reads look at the slots where e's entries were
// last seen until they are empty. Caller holds t.mu.
func (t *Tracker) entriesGoing(e *endpoint) {
	snap, ok := t.tables[e.port]
	if !ok {
		return
	}
	mark := func(i int) {
		if t.going[e.port] == nil {
			t.going[e.port] = map[int]bool{}
		}
		t.going[e.port][i] = true
	}
	for _, g := range e.want.observed() {
		for _, i := range snap.table.ByGID[g] {
			mark(i)
		}
	}
	for _, g := range e.found {
		mark(g.Index)
	}
}

// keepText has the slots of a full read that hold what they held in the
// read before share that read's text (partial reads keep it already), so
// that entries found in an earlier read compare with them by pointer.
func keepText(slots, before []string) {
	for i, s := range slots {
		if s != "" && i < len(before) && s == before[i] {
			slots[i] = before[i]
		}
	}
}
