package runflags

import (
	"errors"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantArgs []string // nil: same as args
		image    string   // "" means no IMAGE
		nets     []string
		own      Own
		runtime  string
		unknown  []string
	}{
		{name: "network with equals", args: []string{"--network=roce", "busybox"}, image: "busybox", nets: []string{"roce"}},
		{name: "net with separate value", args: []string{"--net", "roce", "busybox"}, image: "busybox", nets: []string{"roce"}},
		{name: "net with equals", args: []string{"--net=roce", "busybox", "true"}, image: "busybox", nets: []string{"roce"}},
		{
			name:  "interactive, rm, env and a command",
			args:  []string{"-it", "--rm", "-e", "A=1", "--network", "roce", "busybox", "sh", "-c", "echo $A"},
			image: "busybox", nets: []string{"roce"},
		},
		{
			name:  "advanced network syntax",
			args:  []string{"--network", "name=roce,driver-opt=mtu=1400,alias=a", "img"},
			image: "img", nets: []string{"roce"},
		},
		{
			name:  "advanced syntax with equals and quoted field",
			args:  []string{`--network=name=roce,"driver-opt=a=b,c"`, "img"},
			image: "img", nets: []string{"roce"},
		},
		{
			name:  "flags after IMAGE belong to the command",
			args:  []string{"--network", "roce", "busybox", "--network", "other", "--memlock", "1", "-e", "X"},
			image: "busybox", nets: []string{"roce"},
		},
		{
			name:  "double dash before IMAGE",
			args:  []string{"--rm", "--network", "roce", "--", "busybox", "sh", "--", "-x"},
			image: "busybox", nets: []string{"roce"},
		},
		{
			name: "double dash with nothing after it",
			args: []string{"--network", "roce", "--"},
			nets: []string{"roce"},
		},
		{
			name:  "value that looks like a flag is a value",
			args:  []string{"-e", "--network=x", "--name", "--rm", "busybox"},
			image: "busybox",
		},
		{
			name:  "short groups",
			args:  []string{"-dit", "--name", "c1", "-eFOO=bar", "-p80:80", "-d=false", "-v", "/a:/b", "--network", "roce", "img"},
			image: "img", nets: []string{"roce"},
		},
		{
			name:  "short bool group ending in a value flag takes the next argument",
			args:  []string{"-itu", "1000", "--net", "roce", "img"},
			image: "img", nets: []string{"roce"},
		},
		{
			name:  "-h is the hostname",
			args:  []string{"-h", "node1", "--net", "roce", "img"},
			image: "img", nets: []string{"roce"},
		},
		{
			name:     "own flags are taken out wherever they stand before IMAGE",
			args:     []string{"--memlock", "8M", "-it", "--dry-run", "--network", "roce", "--device-mode=nodes", "--plugin", "p", "--socket=/s", "img", "--dry-run"},
			wantArgs: []string{"-it", "--network", "roce", "img", "--dry-run"},
			image:    "img", nets: []string{"roce"},
			own: Own{Memlock: "8M", DryRun: true, DeviceMode: "nodes", Plugin: "p", Socket: "/s"},
		},
		{
			name:     "dry-run=false",
			args:     []string{"--dry-run=false", "--net", "roce", "img"},
			wantArgs: []string{"--net", "roce", "img"},
			image:    "img", nets: []string{"roce"},
		},
		{
			name:     "every own flag",
			args:     []string{"--no-wait", "--gid-timeout=3s", "--roce-version", "1", "--gid-family", "ipv6", "--accept-gid-mismatch", "--exec-helper", "/x", "--net", "roce", "img"},
			wantArgs: []string{"--net", "roce", "img"},
			image:    "img", nets: []string{"roce"},
			own: Own{NoWait: true, GIDTimeout: "3s", RoCEVersion: "1", GIDFamily: "ipv6", AcceptMismatch: true, ExecHelper: "/x"},
		},
		{
			name:  "the user's runtime is seen and kept",
			args:  []string{"--runtime", "runc", "--ulimit=memlock=1024:2048", "--net", "roce", "img"},
			image: "img", nets: []string{"roce"},
			runtime: "runc",
		},
		{name: "--runtime=", args: []string{"--runtime=nvidia", "img"}, image: "img", runtime: "nvidia"},
		{name: "several networks", args: []string{"--network", "a", "--network=b", "img"}, image: "img", nets: []string{"a", "b"}},
		{name: "no IMAGE", args: []string{"--rm", "--network", "roce"}, nets: []string{"roce"}},
		{
			name:  "unknown long flag is passed on and taken as a boolean",
			args:  []string{"--frobnicate", "--network", "roce", "img"},
			image: "img", nets: []string{"roce"},
			unknown: []string{"--frobnicate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			want := tt.wantArgs
			if want == nil {
				want = tt.args
			}
			if !reflect.DeepEqual(p.Args, want) {
				t.Errorf("Args = %q, want %q", p.Args, want)
			}
			image := ""
			if p.Image >= 0 {
				image = p.Args[p.Image]
			}
			if image != tt.image {
				t.Errorf("IMAGE = %q, want %q", image, tt.image)
			}
			var nets []string
			for _, n := range p.Networks {
				nets = append(nets, n.Name)
			}
			if !reflect.DeepEqual(nets, tt.nets) {
				t.Errorf("networks = %q, want %q", nets, tt.nets)
			}
			if p.Own != tt.own {
				t.Errorf("own flags = %+v, want %+v", p.Own, tt.own)
			}
			if p.Runtime != tt.runtime {
				t.Errorf("runtime = %q, want %q", p.Runtime, tt.runtime)
			}
			if !reflect.DeepEqual(p.Unknown, tt.unknown) {
				t.Errorf("unknown = %q, want %q", p.Unknown, tt.unknown)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--name"},
		{"--rm", "-e"},
		{"-itv"},
		{"--memlock"},
		{"--device-mode", "sometimes", "img"},
		{"--dry-run=maybe", "img"},
	} {
		if _, err := Parse(args); !errors.Is(err, ErrUsage) {
			t.Errorf("Parse(%q) = %v, want a usage error", args, err)
		}
	}
}

// TestAdded: docker rdma run's own flags become the runtime's variables
// (named as package api names them), --memlock a --ulimit, and
// --runtime rdma-macvlan goes first unless the user gave a runtime; the
// user's arguments are the unchanged tail.
func TestAdded(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // the added flags
		err  string
	}{
		{name: "nothing asked", args: []string{"--net", "roce", "img"}, want: []string{"--runtime", api.RuntimeName}},
		{name: "--no-wait", args: []string{"--no-wait", "img"}, want: []string{"--runtime", "rdma-macvlan", "-e", api.EnvNoWait + "=1"}},
		{name: "--gid-timeout", args: []string{"--gid-timeout", "1m30s", "img"}, want: []string{"--runtime", "rdma-macvlan", "-e", api.EnvGIDTimeout + "=1m30s"}},
		{name: "--roce-version", args: []string{"--roce-version", "1", "img"}, want: []string{"--runtime", "rdma-macvlan", "-e", api.EnvRoCEVersion + "=1"}},
		{name: "--gid-family", args: []string{"--gid-family=ipv4", "img"}, want: []string{"--runtime", "rdma-macvlan", "-e", api.EnvGIDFamily + "=ipv4"}},
		{name: "--accept-gid-mismatch", args: []string{"--accept-gid-mismatch", "img"}, want: []string{"--runtime", "rdma-macvlan", "-e", api.EnvAcceptMismatch + "=1"}},
		{name: "--memlock", args: []string{"--memlock", "64K:8M", "img"}, want: []string{"--runtime", "rdma-macvlan", "--ulimit", "memlock=65536:8388608"}},
		{name: "--memlock unlimited", args: []string{"--memlock=unlimited", "img"}, want: []string{"--runtime", "rdma-macvlan", "--ulimit", "memlock=-1:-1"}},
		{name: "the user's runtime", args: []string{"--runtime", "runc", "--no-wait", "img"}, want: []string{"-e", "RDMA_MACVLAN_NO_WAIT=1"}},
		{name: "ignored flags add nothing", args: []string{"--device-mode", "cdi", "--exec-helper", "/x", "--dry-run", "img"}, want: []string{"--runtime", "rdma-macvlan"}},
		{name: "every flag, in this order", args: []string{"--memlock", "8M", "--accept-gid-mismatch", "--gid-family", "ipv6", "--roce-version", "2", "--gid-timeout", "3s", "--no-wait", "img"},
			want: []string{"--runtime", "rdma-macvlan", "-e", "RDMA_MACVLAN_NO_WAIT=1", "-e", "RDMA_MACVLAN_GID_TIMEOUT=3s", "-e", "RDMA_MACVLAN_ROCE_VERSION=2",
				"-e", "RDMA_MACVLAN_GID_FAMILY=ipv6", "-e", "RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1", "--ulimit", "memlock=8388608:8388608"}},
		{name: "a GID timeout that is not a duration", args: []string{"--gid-timeout", "10", "img"}, err: `--gid-timeout "10"`},
		{name: "a negative GID timeout", args: []string{"--gid-timeout", "-1s", "img"}, err: `--gid-timeout "-1s"`},
		{name: "RoCE version 3", args: []string{"--roce-version", "3", "img"}, err: `--roce-version "3"`},
		{name: "family ipx", args: []string{"--gid-family", "ipx", "img"}, err: `--gid-family "ipx"`},
		{name: "memlock lots", args: []string{"--memlock", "lots", "img"}, err: `--memlock: invalid memlock limit "lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			added, err := Added(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Added: %q, %v; want an error saying %q", added, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(added, tt.want) {
				t.Errorf("added =\n  %q\nwant\n  %q", added, tt.want)
			}
			run := p.WithFlags(added)
			if want := append(append([]string{}, tt.want...), p.Args...); !reflect.DeepEqual(run.Args, want) || run.ImageName() != "img" {
				t.Errorf("run =\n  %q (IMAGE %q)\nwant\n  %q", run.Args, run.ImageName(), want)
			}
		})
	}
}

func TestParseMemlock(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "-1:-1"},
		{"-1", "-1:-1"},
		{"unlimited", "-1:-1"},
		{"8388608", "8388608:8388608"},
		{"8M", "8388608:8388608"},
		{"8MiB", "8388608:8388608"},
		{"64k", "65536:65536"},
		{"1G", "1073741824:1073741824"},
		{"512B", "512:512"},
		{"64K:8M", "65536:8388608"},
		{"1024:-1", "1024:-1"},
		{"-1:1024", ""},
		{"2M:1M", ""},
		{"lots", ""},
		{"8T", ""},
		{"-5", ""},
		{"1:", ""},
	}
	for _, tt := range tests {
		got, err := ParseMemlock(tt.in)
		if tt.want == "" {
			if !errors.Is(err, ErrMemlock) {
				t.Errorf("ParseMemlock(%q) = %q, %v; want an error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMemlock(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// helpLine matches a flag line of `docker run --help`:
// "  -e, --env list   Set ..." or "      --rm   Automatically ...".
var helpLine = regexp.MustCompile(`^\s+(?:-([A-Za-z]), )?--([a-z0-9-]+)(?: ([a-z0-9-]+))?(?:\s{2,}|$)`)

// TestTableMatchesDockerHelp checks the flag table against `docker run
// --help` of every docker CLI installed here (the help needs no daemon):
// every flag it lists is in the table, with and without a value as it says.
func TestTableMatchesDockerHelp(t *testing.T) {
	clis := map[string]bool{}
	for _, c := range []string{"docker", "/usr/bin/docker", "/usr/local/bin/docker"} {
		if p, err := exec.LookPath(c); err == nil {
			clis[p] = true
		}
	}
	if len(clis) == 0 {
		t.Skip("no docker CLI installed")
	}
	for cli := range clis {
		out, err := exec.Command(cli, "run", "--help").Output()
		if err != nil {
			t.Errorf("%s run --help: %v", cli, err)
			continue
		}
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			m := helpLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			short, long, typ := m[1], m[2], m[3]
			value, known := TakesValue(long)
			if !known {
				t.Errorf("%s: flag --%s is not in the table", cli, long)
				continue
			}
			if value != (typ != "") {
				t.Errorf("%s: flag --%s: table says takes a value = %v, help says type %q", cli, long, value, typ)
			}
			if short != "" {
				c := short[0]
				if l, ok := shortValue[c]; ok && (l != long || typ == "") {
					t.Errorf("%s: -%s: table says --%s with a value, help says --%s %s", cli, short, l, long, typ)
				}
				if l, ok := shortBool[c]; ok && (l != long || typ != "") {
					t.Errorf("%s: -%s: table says --%s without a value, help says --%s %s", cli, short, l, long, typ)
				}
				if _, v := shortValue[c]; !v {
					if _, b := shortBool[c]; !b {
						t.Errorf("%s: -%s (--%s) is not in the table", cli, short, long)
					}
				}
			}
		}
		if n < 90 {
			t.Errorf("%s run --help: only %d flags recognised; has the help format changed?", cli, n)
		}
		t.Logf("%s: %d flags checked", cli, n)
	}
}
