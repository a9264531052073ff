package rdma

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
)

// GIDTable is a cheap view of a port's GID table: which GIDs are populated
// and where, without their attributes. Reading it costs one read per slot,
// a third of what GIDs costs on a full table; admission and readiness
// polling only need this.
type GIDTable struct {
	Size  int              // number of slots
	Used  int              // populated slots
	ByGID map[string][]int // kernel text of each populated GID -> its indexes, ascending
	// Slots holds the kernel text of each slot's GID ("" when empty), in
	// slot order: what Refresh starts from. Nil in tables made by hand.
	Slots []string
}

// Table reads the populated GIDs of a port, without their attributes.
// Equivalent to: grep -v 0000:0000:0000:0000:0000:0000:0000:0000 gids/*
func (s *Sysfs) Table(hca string, port int) (GIDTable, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return GIDTable{}, err
	}
	dir := filepath.Join(s.portDir(hca, port), "gids")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return GIDTable{}, fmt.Errorf("read GID table of RDMA device %s port %d: %w (check: rdma link show %s/%d)", hca, port, err, hca, port)
	}
	t := GIDTable{ByGID: make(map[string][]int)}
	indices := make([]int, 0, len(entries))
	for _, e := range entries {
		if i, err := strconv.Atoi(e.Name()); err == nil && i >= 0 {
			indices = append(indices, i)
		}
	}
	t.Size = len(indices)
	buf := make([]byte, 64)
	sort.Ints(indices)
	if n := len(indices); n > 0 && indices[n-1] == n-1 {
		t.Slots = make([]string, n) // slots 0..n-1, as the kernel numbers them
	}
	for _, i := range indices {
		text := readSlot(dir, i, buf)
		if text == "" {
			continue
		}
		if t.Slots != nil {
			t.Slots[i] = text
		}
		t.Used++
		t.ByGID[text] = append(t.ByGID[text], i)
	}
	return t, nil
}

// readSlot reads the GID of slot i in dir ("" when empty or unreadable).
func readSlot(dir string, i int, buf []byte) string {
	text, ok := readSmall(filepath.Join(dir, strconv.Itoa(i)), buf)
	if !ok || text == zeroGID {
		return ""
	}
	return strings.ToLower(text)
}

// Refresh returns t with the slots of indices read again; t itself is not
// changed (it may be shared). It reads one file per index instead of one
// per slot: the kernel puts a new entry in the lowest free slot, so the
// few lowest free slots (FreeSlots) and the slots of entries known to be
// going are where a table changes. Anything else changes only in the next
// full read (Table). t must come from Table or Refresh.
func (s *Sysfs) Refresh(hca string, port int, t GIDTable, indices []int) (GIDTable, error) {
	if err := checkName("RDMA device", hca); err != nil {
		return t, err
	}
	if t.Slots == nil {
		return s.Table(hca, port)
	}
	dir := filepath.Join(s.portDir(hca, port), "gids")
	buf := make([]byte, 64)
	var slots []string
	var byGID map[string][]int
	for _, i := range indices {
		if i < 0 || i >= len(t.Slots) {
			continue
		}
		text := readSlot(dir, i, buf)
		if slots == nil {
			if text == t.Slots[i] {
				continue
			}
			slots = slices.Clone(t.Slots)
			byGID = maps.Clone(t.ByGID)
		}
		old := slots[i]
		if text == old {
			continue
		}
		if old != "" {
			idx := slices.DeleteFunc(slices.Clone(byGID[old]), func(x int) bool { return x == i })
			if len(idx) == 0 {
				delete(byGID, old)
			} else {
				byGID[old] = idx
			}
			t.Used--
		}
		if text != "" {
			idx := append(slices.Clone(byGID[text]), i)
			slices.Sort(idx)
			byGID[text] = idx
			t.Used++
		}
		slots[i] = text
	}
	if slots != nil {
		t.Slots, t.ByGID = slots, byGID
	}
	return t, nil
}

// FreeSlots returns the n lowest empty slots of t (fewer if t has fewer).
func (t GIDTable) FreeSlots(n int) []int {
	var out []int
	for i, g := range t.Slots {
		if len(out) >= n {
			break
		}
		if g == "" {
			out = append(out, i)
		}
	}
	return out
}

// GIDType reads the RoCE type of one populated slot ("" if the kernel will
// not say: the slot is being added or removed).
func (s *Sysfs) GIDType(hca string, port, index int) string {
	if checkName("RDMA device", hca) != nil {
		return ""
	}
	v, _ := readAttr(filepath.Join(s.portDir(hca, port), "gid_attrs", "types", strconv.Itoa(index)))
	return v
}

const zeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

// readSmall reads a short sysfs attribute into buf without allocating a
// new buffer per file (see sysattr.Read).
func readSmall(path string, buf []byte) (string, bool) {
	v, err := sysattr.Read(path, buf)
	if err != nil || v == "" {
		return "", false
	}
	return v, true
}
