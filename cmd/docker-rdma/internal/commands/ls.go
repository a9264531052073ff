package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// lsNetwork is one row of docker rdma ls (and its JSON form).
type lsNetwork struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Driver string `json:"driver"`
	Parent string `json:"parent"`
	// Subnets are the network's subnets as this host's engine has them,
	// each with this host's --ip-range of it, if any.
	Subnets []lsSubnet `json:"subnets,omitempty"`
	netFacts
	Containers int `json:"containers"`
	// DeviceFlags are the docker run flags that give a container the
	// network's devices on this engine, one argument per element.
	DeviceFlags []string `json:"device_flags"`
	DeviceNodes []string `json:"device_nodes,omitempty"`
}

type lsSubnet struct {
	Subnet  string `json:"subnet"`
	IPRange string `json:"ip_range,omitempty"`
}

type lsOutput struct {
	Networks []lsNetwork `json:"networks"`
}

func cmdLs(s *session, args []string) int {
	fs, format := newFlagSet("ls", s.env)
	commonFlags(s, fs)
	fs.StringVar(&s.sysfsRootFlag, "sysfs-root", "", "read sysfs under this root when the daemon cannot be asked (default: the plugin's sysfs mount, else /)")
	if _, status, ok := parseCommand(s, fs, format, args, false); !ok {
		return status
	}
	nets, err := s.rdmaNetworks()
	if err != nil {
		tprintf(s.env.Stderr, "docker rdma ls: %v\n", err)
		return 1
	}
	out := lsOutput{Networks: []lsNetwork{}}
	for _, n := range nets {
		in, _ := describeNetwork(s, n)
		row := in.lsNetwork
		out.Networks = append(out.Networks, row)
	}
	if *format == "json" {
		return writeJSON(s.env.Stdout, out)
	}
	renderLs(s.env.Stdout, out)
	if len(out.Networks) == 0 {
		fmt.Fprintln(s.env.Stderr, "no rdma-macvlan networks; create one: docker network create -d rdma-macvlan -o parent=<RoCE netdev> --subnet <CIDR> NAME")
	}
	return 0
}

// renderLs prints the table and, under it, each network's problems and
// what could not be found out.
func renderLs(w io.Writer, out lsOutput) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDRIVER\tPARENT\tHCA\tPORT\tSTATE\tCONTAINERS\tGID TABLE\tQOS\tDEVICE FLAGS")
	for _, n := range out.Networks {
		port := ""
		if n.Port > 0 {
			port = strconv.Itoa(n.Port)
		}
		tprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
			n.Name, n.Driver, dash(n.Parent), dash(n.HCA), dash(port), dash(n.PortState), n.Containers,
			gidCell(n.GIDTable), qosText(n.TrafficClass, n.ServiceLevel), dash(shellJoin(n.DeviceFlags)))
	}
	_ = tw.Flush()
	notes := map[string][]string{}
	for _, n := range out.Networks {
		for _, p := range n.Problems {
			tprintf(w, "%s: problem: %s\n", n.Name, p)
		}
		for _, m := range n.Missing {
			notes[m] = append(notes[m], n.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(notes)) {
		tprintf(w, "%s: not known: %s\n", strings.Join(notes[k], ", "), k)
	}
}

// barWidth is the width of a GID table bar between its brackets.
const barWidth = 10

// bar draws how full a table is: [###.......]. Any use shows at least one
// mark and only a full table is all marks.
func bar(used, size int) string {
	if size <= 0 {
		return "[" + strings.Repeat("?", barWidth) + "]"
	}
	used = min(max(used, 0), size)
	fill := (used*barWidth + size/2) / size
	if used > 0 && fill == 0 {
		fill = 1
	}
	if used < size && fill == barWidth {
		fill = barWidth - 1
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", barWidth-fill) + "]"
}

func gidCell(t *api.GIDTable) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s %d/%d", bar(t.Used, t.Size), t.Used, t.Size)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeJSON writes v as indented JSON, with the characters of its
// strings that are not printable escaped (escapeJSON).
func writeJSON(w io.Writer, v any) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	if _, err := w.Write(escapeJSON(b.Bytes())); err != nil {
		return 1
	}
	return 0
}
