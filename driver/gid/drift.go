package gid

import (
	"slices"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// An endpoint's entries can move after it is ready: a bond failover or a
// device re-registration (firmware reset, devlink reload) makes the kernel
// delete and add again every entry of the port, which can reorder the
// table, and a workload keeps the index it was given. Every read of a
// port's table (a watch's poll, admission, the status) is checked against
// the entries its ready endpoints were found at; the check reads nothing
// more unless an entry moved.

// Drift reports that the entries endpoint ID was found at moved.
type Drift struct {
	ID    string
	Port  Port
	Moves []Move
}

// Move is one entry of an endpoint that is no longer where it was found.
type Move struct {
	GID, Type string
	// Given is the index the entry was found at (what the workload was
	// given); Now where the same GID and type are now, -1 if nowhere.
	Given, Now int
}

// moved reports whether an entry of found is not at its index in table.
func moved(found []Entry, table rdma.GIDTable) bool {
	for _, f := range found {
		if !holds(table, f) {
			return true
		}
	}
	return false
}

// holds reports whether table has f's GID at f's index. A table read from
// sysfs has its slots: the slot's text is compared, which costs no hash of
// the GID (this runs for every ready endpoint of the port on every read).
func holds(table rdma.GIDTable, f Entry) bool {
	if table.Slots != nil {
		return f.Index >= 0 && f.Index < len(table.Slots) && table.Slots[f.Index] == f.GID
	}
	return slices.Contains(table.ByGID[f.GID], f.Index)
}

// driftChecked is what the last drift check of a port judged: the slots
// of its table, the Tracker's track count then (readiness recorded or
// reset, endpoints added or admitted), and whether it left an endpoint for
// a later read (found ready by a read that began after its own).
type driftChecked struct {
	slots    []string
	gen      uint64
	deferred bool
}

// checkDrift compares table, just read from port p in a read that began
// at at, with the entries of the port's ready endpoints, and reports (once
// per readiness) each whose entries moved. An endpoint found ready by a
// read that began after at is not judged on this older table, which may
// not show its entries yet. Called without t.mu.
//
// A partial read that changed no slot returns the very slots of the read
// before (rdma.Sysfs.Refresh). When the last check judged those same
// slots, no endpoint became ready since and none was left for later, this
// check would judge the same endpoints on the same slots: it is skipped.
// Most reads of a watch's polls are such reads, and a check visits every
// endpoint of the host.
func (t *Tracker) checkDrift(p Port, table rdma.GIDTable, at time.Time) {
	type hit struct {
		id    string
		found []Entry
	}
	var hits []hit
	t.mu.Lock()
	if c, ok := t.checked[p]; ok && !c.deferred && c.gen == t.readyGen && sameSlots(c.slots, table.Slots) {
		t.mu.Unlock()
		return
	}
	deferred := false
	for _, e := range t.eps {
		if e.port != p || !e.ready || e.drifted || len(e.found) == 0 {
			continue
		}
		if e.readyAt.After(at) {
			deferred = true
			continue
		}
		if !moved(e.found, table) {
			continue
		}
		e.drifted = true
		hits = append(hits, hit{e.id, e.found})
	}
	t.checked[p] = driftChecked{slots: table.Slots, gen: t.readyGen, deferred: deferred}
	t.mu.Unlock()
	if t.drift == nil {
		return
	}
	for _, h := range hits {
		d := Drift{ID: h.id, Port: p}
		for _, f := range h.found {
			if holds(table, f) {
				continue
			}
			now := -1
			for _, i := range table.ByGID[f.GID] {
				if t.sys.GIDType(p.HCA, p.Port, i) == f.Type {
					now = i
					break
				}
			}
			d.Moves = append(d.Moves, Move{GID: f.GID, Type: f.Type, Given: f.Index, Now: now})
		}
		t.drift(d)
	}
}

// sameSlots reports whether a and b are the same slots, not equal ones:
// one read's, kept by a partial read that changed nothing.
func sameSlots(a, b []string) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}
