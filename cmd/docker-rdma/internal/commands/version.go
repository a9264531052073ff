package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// versionPlugin is one rdma-macvlan daemon in docker rdma version.
type versionPlugin struct {
	// Name is the managed plugin's name (what -d takes), or "rdma-macvlan"
	// for the legacy plugin, "" for --socket.
	Name    string `json:"name,omitempty"`
	ID      string `json:"id,omitempty"`
	Enabled bool   `json:"enabled"`
	Socket  string `json:"socket,omitempty"`
	// Version is what the daemon reports in /v1/status; "" when it
	// cannot be asked (Error says why) or is older than versioned status.
	Version string `json:"version"`
	// Driver is the name docker network create -d takes.
	Driver string `json:"driver,omitempty"`
	Error  string `json:"error,omitempty"`
}

type versionOutput struct {
	CLI     string          `json:"cli"`
	Engine  string          `json:"engine,omitempty"`
	API     string          `json:"engine_error,omitempty"`
	CDI     bool            `json:"engine_cdi"`
	CDIDirs []string        `json:"engine_cdi_spec_dirs,omitempty"`
	Plugins []versionPlugin `json:"plugins"`
}

// cmdVersion prints the versions of docker rdma, of each rdma-macvlan
// daemon (from its /v1/status) and of the engine, and whether the engine
// reads CDI specs. It fails (1) only when the engine cannot be asked.
func cmdVersion(s *session, args []string, cli string) int {
	fs, format := newFlagSet("version", s.env)
	commonFlags(s, fs)
	if _, status, ok := parseCommand(s, fs, format, args, false); !ok {
		return status
	}
	out := versionOutput{CLI: cli, Plugins: []versionPlugin{}}
	info, infoErr := s.dockerInfo()
	if infoErr != nil {
		out.API = infoErr.Error()
	} else {
		out.Engine = info.ServerVersion
		out.CDIDirs = info.CDISpecDirs
		out.CDI = len(info.CDISpecDirs) > 0
	}
	var bs []*backend
	var vs []versionPlugin
	if s.opts.socket != "" {
		bs = append(bs, s.backendAt(s.opts.socket, nil, "--socket"))
		vs = append(vs, versionPlugin{Socket: s.opts.socket, Enabled: true})
	} else if infoErr == nil {
		for _, p := range s.rdmaPlugins() {
			v := versionPlugin{Name: p.Name, ID: shortID(p.ID), Enabled: p.Enabled, Driver: p.Name}
			if !p.Enabled {
				v.Error = "disabled (docker plugin enable " + p.Name + ")"
				bs, vs = append(bs, nil), append(vs, v)
				continue
			}
			pc := p
			b := s.backendAt(s.pluginSocket(p), &pc, "managed plugin "+p.Name)
			v.Socket = b.Socket
			bs, vs = append(bs, b), append(vs, v)
		}
		if b, err := s.backendFor(firstNonEmpty(s.opts.plugin, legacyName)); err == nil && b.Plugin == nil {
			name := trimTag(firstNonEmpty(s.opts.plugin, legacyName))
			bs = append(bs, b)
			vs = append(vs, versionPlugin{Name: name, Enabled: true, Socket: b.Socket, Driver: name})
		}
	}
	for i, b := range bs {
		if b == nil {
			continue
		}
		st, err := s.status(b)
		switch {
		case err != nil:
			vs[i].Error = err.Error()
		case st.Version == "":
			vs[i].Error = "its /v1/status has no version: a build from before versions were reported"
		default:
			vs[i].Version = st.Version
		}
	}
	out.Plugins = append(out.Plugins, vs...)
	if *format == "json" {
		writeJSON(s.env.Stdout, out)
	} else {
		renderVersion(s.env.Stdout, out)
	}
	if infoErr != nil {
		return 1
	}
	return 0
}

func renderVersion(w io.Writer, o versionOutput) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tprintf(tw, "docker rdma:\t%s\n", o.CLI)
	if o.Engine == "" {
		tprintf(tw, "engine:\tunknown (%s)\n", o.API)
	} else if o.CDI {
		tprintf(tw, "engine:\tDocker %s, reads CDI specs from %s\n", o.Engine, strings.Join(o.CDIDirs, ", "))
	} else {
		tprintf(tw, "engine:\tDocker %s, no CDI (the runtime injects the CDI edits itself)\n", o.Engine)
	}
	if len(o.Plugins) == 0 && o.Engine != "" {
		tprintf(tw, "plugin:\tnone installed (%s)\n", installHint)
	}
	for _, p := range o.Plugins {
		var what string
		switch {
		case p.Name == "":
			what = "daemon at " + p.Socket
		case p.ID != "":
			what = fmt.Sprintf("%s (id %s)", p.Name, p.ID)
		default:
			what = p.Name + " (legacy)"
		}
		v := p.Version
		if v == "" {
			v = "unknown: " + p.Error
		}
		tprintf(tw, "plugin %s:\t%s\n", what, v)
		if p.Driver != "" {
			tprintf(tw, "  network driver:\tdocker network create -d %s ...\n", p.Driver)
		}
	}
	tw.Flush()
}
