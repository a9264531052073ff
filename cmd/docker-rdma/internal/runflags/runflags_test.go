package runflags

import (
	"errors"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantArgs []string // nil: same as args
		image    string   // "" means no IMAGE
		nets     []string
		own      Own
		memlock  string
		devices  []string
		capAdd   []string
		priv     bool
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
			name:  "user's ulimit memlock and devices are seen and kept",
			args:  []string{"--ulimit", "nofile=1024", "--ulimit=memlock=1024:2048", "--device", "/dev/infiniband/uverbs0", "--device=/dev/fuse", "--net", "roce", "img"},
			image: "img", nets: []string{"roce"},
			memlock: "memlock=1024:2048",
			devices: []string{"/dev/infiniband/uverbs0", "/dev/fuse"},
		},
		{
			name:  "cap-add and privileged",
			args:  []string{"--cap-add", "ipc_lock", "--privileged", "--net", "roce", "img"},
			image: "img", nets: []string{"roce"},
			capAdd: []string{"ipc_lock"},
			priv:   true,
		},
		{name: "privileged=false", args: []string{"--privileged=false", "img"}, image: "img"},
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
			if p.UlimitMemlock != tt.memlock {
				t.Errorf("ulimit memlock = %q, want %q", p.UlimitMemlock, tt.memlock)
			}
			if !reflect.DeepEqual(p.Devices, tt.devices) {
				t.Errorf("devices = %q, want %q", p.Devices, tt.devices)
			}
			if !reflect.DeepEqual(p.CapAdd, tt.capAdd) {
				t.Errorf("cap-add = %q, want %q", p.CapAdd, tt.capAdd)
			}
			if p.Privileged != tt.priv {
				t.Errorf("privileged = %v, want %v", p.Privileged, tt.priv)
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

func TestBuild(t *testing.T) {
	nodes := Devices{Nodes: []string{"/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"}}
	cdi := Devices{CDI: []string{"rdma-macvlan/hca=mlx5_0"}}
	tests := []struct {
		name  string
		args  []string
		dev   Devices
		want  []string
		notes int
	}{
		{
			name: "device nodes",
			args: []string{"-it", "--rm", "--net", "roce", "img", "sh"},
			dev:  nodes,
			want: []string{"run", "--device", "/dev/infiniband/uverbs0", "--device", "/dev/infiniband/rdma_cm",
				"--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1", "-it", "--rm", "--net", "roce", "img", "sh"},
		},
		{
			name: "CDI",
			args: []string{"--net", "roce", "img"},
			dev:  cdi,
			want: []string{"run", "--device", "rdma-macvlan/hca=mlx5_0", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1", "--net", "roce", "img"},
		},
		{
			name: "user's device, cap and ulimit are kept and not repeated",
			args: []string{"--device", "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rw", "--cap-add", "CAP_IPC_LOCK", "--ulimit", "memlock=65536", "--net", "roce", "img"},
			dev:  nodes,
			want: []string{"run", "--device", "/dev/infiniband/rdma_cm",
				"--device", "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rw", "--cap-add", "CAP_IPC_LOCK", "--ulimit", "memlock=65536", "--net", "roce", "img"},
			notes: 2,
		},
		{
			name:  "user's CDI device",
			args:  []string{"--device=rdma-macvlan/hca=mlx5_0", "--net", "roce", "img"},
			dev:   cdi,
			want:  []string{"run", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1", "--device=rdma-macvlan/hca=mlx5_0", "--net", "roce", "img"},
			notes: 1,
		},
		{
			name: "privileged needs no cap-add",
			args: []string{"--privileged", "--net", "roce", "img"},
			dev:  cdi,
			want: []string{"run", "--device", "rdma-macvlan/hca=mlx5_0", "--ulimit", "memlock=-1:-1", "--privileged", "--net", "roce", "img"},
		},
		{
			name:  "cap-drop IPC_LOCK is respected",
			args:  []string{"--cap-drop", "IPC_LOCK", "--net", "roce", "img"},
			dev:   Devices{},
			want:  []string{"run", "--ulimit", "memlock=-1:-1", "--cap-drop", "IPC_LOCK", "--net", "roce", "img"},
			notes: 1,
		},
		{
			name: "cap-drop ALL still gets IPC_LOCK",
			args: []string{"--cap-drop", "ALL", "--net", "roce", "img"},
			dev:  Devices{},
			want: []string{"run", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1", "--cap-drop", "ALL", "--net", "roce", "img"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			plan := Build(p, tt.dev, "-1:-1")
			if !reflect.DeepEqual(plan.Argv, tt.want) {
				t.Errorf("argv =\n  %q\nwant\n  %q", plan.Argv, tt.want)
			}
			if len(plan.Notes) != tt.notes {
				t.Errorf("notes = %q, want %d", plan.Notes, tt.notes)
			}
			// The user's arguments are the unchanged tail.
			tail := plan.Argv[len(plan.Argv)-len(tt.args):]
			if !reflect.DeepEqual(tail, tt.args) {
				t.Errorf("user's arguments changed: %q, want %q", tail, tt.args)
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
