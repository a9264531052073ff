package ociruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/sysattr"
)

// viewDirs are the sysfs classes a container sees filtered.
var viewDirs = []string{"infiniband", "infiniband_verbs"}

// sweepAge is how old a view must be before a sweep may remove it while
// the next runtime has no container of its name: a create in progress has
// its view before the next runtime records the container.
const sweepAge = time.Minute

// viewRoot is the directory of the views of one runc root (one engine):
// views of engines with other roots are never swept by this one.
func viewRoot(stateDir, runcRoot string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(runcRoot)))
	return filepath.Join(stateDir, hex.EncodeToString(sum[:6]))
}

// MakeView builds the view of container id: infiniband/ with a link for
// each of hcas as the host's /sys/class/infiniband has it, infiniband_verbs/
// with their uverbs links and abi_version (libibverbs reads it). The links
// are the host's own, relative (../../devices/...), so they resolve in the
// container's /sys. It returns "" and builds nothing when none of hcas is
// in sysRoot's sys/class/infiniband: the host has nothing to hide (the
// plugin's HCAs are a test's fake tree).
func MakeView(sysRoot, root, id string, hcas []string) (string, error) {
	class := filepath.Join(sysRoot, "sys/class")
	type link struct{ dir, name, target string }
	var links []link
	for _, h := range hcas {
		t, err := os.Readlink(filepath.Join(class, "infiniband", h))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("sysfs view: %w", err)
		}
		links = append(links, link{"infiniband", h, t})
	}
	if len(links) == 0 {
		return "", nil
	}
	verbs, err := os.ReadDir(filepath.Join(class, "infiniband_verbs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("sysfs view: %w", err)
	}
	for _, v := range verbs {
		if !strings.HasPrefix(v.Name(), "uverbs") {
			continue
		}
		var buf [64]byte
		dev, err := sysattr.Read(filepath.Join(class, "infiniband_verbs", v.Name(), "ibdev"), buf[:])
		if err != nil || !slices.Contains(hcas, strings.TrimSpace(dev)) {
			continue
		}
		t, err := os.Readlink(filepath.Join(class, "infiniband_verbs", v.Name()))
		if err != nil {
			return "", fmt.Errorf("sysfs view: %w", err)
		}
		links = append(links, link{"infiniband_verbs", v.Name(), t})
	}
	if !validID(id) {
		return "", fmt.Errorf("sysfs view: container ID %q", id)
	}
	dir := filepath.Join(root, id)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("sysfs view: %w", err)
	}
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("sysfs view %s: %w", dir, err)
	}
	for _, d := range viewDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail(err)
		}
	}
	for _, l := range links {
		if err := os.Symlink(l.target, filepath.Join(dir, l.dir, l.name)); err != nil {
			return fail(err)
		}
	}
	if abi, err := os.ReadFile(filepath.Join(class, "infiniband_verbs", "abi_version")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "infiniband_verbs", "abi_version"), abi, 0o444); err != nil {
			return fail(err)
		}
	}
	return dir, nil
}

// validID reports whether id can name a directory of root's own.
func validID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsRune(id, '/')
}

// exists reports whether path is there (a link counts, followed or not).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// RemoveView removes container id's view, if any.
func RemoveView(root, id string) error {
	if !validID(id) {
		return nil
	}
	return os.RemoveAll(filepath.Join(root, id))
}

// Sweep removes the views of containers the next runtime no longer has
// (a state directory runcRoot/ID) that are older than sweepAge: what a
// crash between create and delete left behind.
func Sweep(root, runcRoot string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(runcRoot, e.Name())); err == nil {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) >= sweepAge {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
