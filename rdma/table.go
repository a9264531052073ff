package rdma

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// GIDTable is a cheap view of a port's GID table: which GIDs are populated
// and where, without their attributes. Reading it costs one read per slot,
// a third of what GIDs costs on a full table; admission and readiness
// polling only need this.
type GIDTable struct {
	Size  int              // number of slots
	Used  int              // populated slots
	ByGID map[string][]int // kernel text of each populated GID -> its indexes, ascending
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
	for _, i := range indices {
		text, ok := readSmall(filepath.Join(dir, strconv.Itoa(i)), buf)
		if !ok || text == zeroGID {
			continue
		}
		text = strings.ToLower(text)
		t.Used++
		t.ByGID[text] = append(t.ByGID[text], i)
	}
	return t, nil
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

// readSmall reads a short sysfs file into buf without allocating a new
// buffer per file.
func readSmall(path string, buf []byte) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err != nil || n == 0 {
		return "", false
	}
	return strings.TrimSpace(string(buf[:n])), true
}
