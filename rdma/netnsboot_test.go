package rdma_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

func TestBootNetnsMode(t *testing.T) {
	type file struct{ path, text string }
	tests := []struct {
		name     string
		files    []file
		links    map[string]string // path -> link target
		wantMode string
		wantFrom string
	}{
		{name: "nothing set: the kernel default", wantMode: "shared", wantFrom: "kernel default"},
		{name: "modprobe.d exclusive",
			files:    []file{{"etc/modprobe.d/ib_core.conf", "# keep devices per netns\noptions ib_core netns_mode=0\n"}},
			wantMode: "exclusive", wantFrom: "/etc/modprobe.d/ib_core.conf:2"},
		{name: "modprobe.d shared among other options",
			files:    []file{{"etc/modprobe.d/rdma.conf", "options mlx5_core prof_sel=2\noptions ib_core foo=1 netns_mode=Y\n"}},
			wantMode: "shared", wantFrom: "/etc/modprobe.d/rdma.conf:2"},
		{name: "another module's netns_mode is not ib_core's",
			files:    []file{{"etc/modprobe.d/x.conf", "options ib_uverbs netns_mode=0\n"}},
			wantMode: "shared", wantFrom: "kernel default"},
		{name: "a commented option does nothing",
			files:    []file{{"etc/modprobe.d/x.conf", "#options ib_core netns_mode=0\n"}},
			wantMode: "shared", wantFrom: "kernel default"},
		{name: "files apply in name order, the last value wins",
			files: []file{
				{"lib/modprobe.d/50-rdma.conf", "options ib_core netns_mode=0\n"},
				{"etc/modprobe.d/90-local.conf", "options ib_core netns_mode=1\n"},
			},
			wantMode: "shared", wantFrom: "/etc/modprobe.d/90-local.conf:1"},
		{name: "/etc hides the same name in /lib",
			files: []file{
				{"lib/modprobe.d/rdma.conf", "options ib_core netns_mode=0\n"},
				{"etc/modprobe.d/rdma.conf", "options ib_core netns_mode=1\n"},
			},
			wantMode: "shared", wantFrom: "/etc/modprobe.d/rdma.conf:1"},
		{name: "a link to /dev/null masks a file",
			files:    []file{{"lib/modprobe.d/rdma.conf", "options ib_core netns_mode=0\n"}},
			links:    map[string]string{"etc/modprobe.d/rdma.conf": "/dev/null"},
			wantMode: "shared", wantFrom: "kernel default"},
		{name: "the kernel command line wins over modprobe.d",
			files: []file{
				{"etc/modprobe.d/ib_core.conf", "options ib_core netns_mode=1\n"},
				{"proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ib_core.netns_mode=0 quiet\n"},
			},
			wantMode: "exclusive", wantFrom: "/proc/cmdline (ib_core.netns_mode=0)"},
		{name: "a unit that switches at boot wins over both",
			files: []file{
				{"proc/cmdline", "ib_core.netns_mode=0\n"},
				{"etc/systemd/system/rdma-shared.service", "[Service]\nType=oneshot\nExecStart=/usr/sbin/rdma system set netns shared\n"},
			},
			wantMode: "shared", wantFrom: "/etc/systemd/system/rdma-shared.service:3"},
		{name: "a unit that only shows the mode changes nothing",
			files:    []file{{"etc/systemd/system/x.service", "[Service]\nExecStart=-rdma system show netns\n"}},
			wantMode: "shared", wantFrom: "kernel default"},
		{name: "only Exec lines run",
			files:    []file{{"etc/systemd/system/x.service", "[Unit]\nDescription=runs rdma system set netns exclusive\n"}},
			wantMode: "shared", wantFrom: "kernel default"},
		{name: "unknown values are ignored",
			files:    []file{{"etc/modprobe.d/x.conf", "options ib_core netns_mode=maybe\n"}},
			wantMode: "shared", wantFrom: "kernel default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(root, f.path)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for p, target := range tt.links {
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			got := rdma.BootNetnsMode(root)
			if got.Mode != tt.wantMode || got.From != tt.wantFrom {
				t.Errorf("BootNetnsMode() = %+v, want %s from %q", got, tt.wantMode, tt.wantFrom)
			}
		})
	}
}

// A FIFO among the configuration files must not stall the check.
func TestBootNetnsModeSkipsFIFOs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/modprobe.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "a.conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.conf"), []byte("options ib_core netns_mode=N\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := rdma.BootNetnsMode(root); got.Mode != rdma.NetnsExclusive || got.From != "/etc/modprobe.d/b.conf:1" {
		t.Errorf("BootNetnsMode() = %+v, want exclusive from /etc/modprobe.d/b.conf:1", got)
	}
}
