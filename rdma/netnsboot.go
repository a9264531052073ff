package rdma

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// BootNetns is the RDMA netns mode the host will start in after its next
// boot, worked out from the configuration that sets it.
type BootNetns struct {
	// Mode is NetnsShared or NetnsExclusive.
	Mode string
	// From names what decides it: "kernel default", or a file and line
	// ("/etc/modprobe.d/ib_core.conf:3", "/proc/cmdline",
	// "/etc/systemd/system/rdma-netns.service:7").
	From string
}

// Where the boot-time mode is set, in the order it is applied: ib_core's
// netns_mode parameter is set by modprobe from its configuration files, then
// from ib_core.netns_mode= on the kernel command line (modprobe appends those
// after the files', and the last value wins); a unit that runs
// `rdma system set netns MODE` at boot runs after the module is loaded.
var (
	modprobeDirs = []string{"etc/modprobe.d", "run/modprobe.d", "usr/local/lib/modprobe.d", "lib/modprobe.d", "usr/lib/modprobe.d"}
	unitDirs     = []string{"etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system", "lib/systemd/system", "usr/lib/systemd/system"}
)

// maxConfigFile bounds what is read of one configuration file.
const maxConfigFile = 1 << 20

// BootNetnsMode works out, under root, which RDMA netns mode the next boot
// starts in. The kernel's default is shared; it reads, in the order they
// apply, `options ib_core netns_mode=` in modprobe.d, `ib_core.netns_mode=`
// on the kernel command line, and systemd units that run
// `rdma system set netns MODE`. A file that cannot be read is skipped: the
// answer is about the configuration, not a guarantee (a script run at boot
// by other means is not seen).
func BootNetnsMode(root string) BootNetns {
	boot := BootNetns{Mode: NetnsShared, From: "kernel default"}
	for _, f := range configFiles(root, modprobeDirs, ".conf") {
		forEachLine(f, func(n int, line string) {
			fields := strings.Fields(line)
			if len(fields) < 3 || fields[0] != "options" || fields[1] != "ib_core" {
				return
			}
			for _, opt := range fields[2:] {
				if v, ok := strings.CutPrefix(opt, "netns_mode="); ok {
					if mode, ok := boolMode(v); ok {
						boot = BootNetns{Mode: mode, From: fmt.Sprintf("%s:%d", hostPath(root, f), n)}
					}
				}
			}
		})
	}
	forEachLine(filepath.Join(root, "proc/cmdline"), func(_ int, line string) {
		for _, arg := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(arg, "ib_core.netns_mode="); ok {
				if mode, ok := boolMode(v); ok {
					boot = BootNetns{Mode: mode, From: "/proc/cmdline (ib_core.netns_mode=" + v + ")"}
				}
			}
		}
	})
	for _, f := range configFiles(root, unitDirs, ".service") {
		forEachLine(f, func(n int, line string) {
			if mode, ok := unitSetsNetns(line); ok {
				boot = BootNetns{Mode: mode, From: fmt.Sprintf("%s:%d", hostPath(root, f), n)}
			}
		})
	}
	return boot
}

// boolMode reads a kernel bool parameter value as a netns mode.
func boolMode(v string) (string, bool) {
	switch strings.ToLower(strings.Trim(v, `"'`)) {
	case "1", "y", "yes", "on", "true":
		return NetnsShared, true
	case "0", "n", "no", "off", "false":
		return NetnsExclusive, true
	}
	return "", false
}

// unitSetsNetns reports the mode an Exec line of a unit sets with
// `rdma system set netns MODE`.
func unitSetsNetns(line string) (string, bool) {
	key, cmd, ok := strings.Cut(strings.TrimSpace(line), "=")
	if !ok || !strings.HasPrefix(key, "Exec") {
		return "", false
	}
	fields := strings.Fields(cmd)
	for i := 0; i+4 < len(fields); i++ {
		if filepath.Base(strings.TrimLeft(fields[i], "-@:+!")) == "rdma" &&
			fields[i+1] == "system" && fields[i+2] == "set" && fields[i+3] == "netns" {
			switch fields[i+4] {
			case NetnsShared, NetnsExclusive:
				return fields[i+4], true
			}
		}
	}
	return "", false
}

// configFiles lists the files ending in ext of dirs under root in the order
// modprobe and systemd read them: by file name, a name in an earlier
// directory hiding the same name in a later one (a link to /dev/null hides
// it and is read as empty).
func configFiles(root string, dirs []string, ext string) []string {
	byName := map[string]string{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ext) {
				continue
			}
			if _, seen := byName[e.Name()]; !seen {
				byName[e.Name()] = filepath.Join(root, dir, e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	files := make([]string, len(names))
	for i, name := range names {
		files[i] = byName[name]
	}
	return files
}

// forEachLine calls fn with each line of a regular file (at most
// maxConfigFile bytes of it), numbered from 1, with comments removed;
// anything else (a device, a FIFO, a directory, a missing file) has no lines.
func forEachLine(path string, fn func(n int, line string)) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile))
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxConfigFile)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.TrimSpace(line) != "" {
			fn(n, line)
		}
	}
}

// hostPath is path as the host names it, without the test root.
func hostPath(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return "/" + rel
}
