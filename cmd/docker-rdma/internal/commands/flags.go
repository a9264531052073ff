package commands

import (
	"flag"
	"fmt"
	"io"
)

// exitUsage is the status of a command line that cannot be understood.
const exitUsage = 2

// usages are the one-line synopses of the commands that use package flag.
var usages = map[string]string{
	"ls":      "docker rdma ls [--format table|json] [--sysfs-root DIR]",
	"inspect": "docker rdma inspect [--format table|json] [--sysfs-root DIR] CONTAINER|NETWORK [...]",
	"version": "docker rdma version [--format table|json]",
	"doctor":  "docker rdma doctor [--format table|json] [--sysfs-root DIR] [--image IMAGE] [--memlock SIZE] [--traffic-class TC]",
}

// abouts say, under a synopsis, what a command does where the synopsis
// does not.
var abouts = map[string]string{
	"doctor": "Checks the host (RDMA devices, ports, GID tables, device nodes, the RDMA netns mode now and at\n" +
		"the next boot), the engine (memlock with --image, the plugin's state and CDI mounts), the plugin\n" +
		"and its networks, each network's fabric (PFC and DSCP trust for its traffic class, MTU) and\n" +
		"GPU placement (which GPUs NCCL would pair with each HCA, from the PCIe topology). Exits 1 when\n" +
		"RDMA is blocked.\n",
}

// newFlagSet returns a flag set for a command and its --format flag.
func newFlagSet(name string, env *Env) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("docker rdma "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:  %s\n\n", usages[name])
		if a := abouts[name]; a != "" {
			fmt.Fprintf(fs.Output(), "%s\n", a)
		}
		fmt.Fprintf(fs.Output(), "Options:\n")
		fs.PrintDefaults()
	}
	format := fs.String("format", "table", "output format: table or json")
	return fs, format
}

// commonFlags adds the options every command takes.
func commonFlags(s *session, fs *flag.FlagSet) {
	fs.StringVar(&s.opts.plugin, "plugin", s.opts.plugin, "the rdma-macvlan plugin's name (default: any plugin with rdma-macvlan's manifest; env "+envPlugin+")")
	fs.StringVar(&s.opts.socket, "socket", s.opts.socket, "the daemon's socket, instead of finding it through Docker (env "+envSocket+")")
}

// parseFlags parses flags placed anywhere among the arguments (docker
// rdma inspect c1 --format json) and returns the other arguments; after
// "--" everything is an argument. For -h/--help it prints the usage to
// stdout and returns status 0 with ok false; on an error it prints it and
// returns exitUsage.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (rest []string, status int, ok bool) {
	if helpAsked(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, 0, false
	}
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, exitUsage, false
		}
		remaining := fs.Args()
		// flag.Parse drops the "--" it stops at.
		if i := len(args) - len(remaining); i > 0 && args[i-1] == "--" {
			return append(rest, remaining...), 0, true
		}
		if len(remaining) == 0 {
			break
		}
		rest = append(rest, remaining[0])
		args = remaining[1:]
	}
	return rest, 0, true
}

// helpAsked reports whether args ask for help before any "--".
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func checkFormat(f string) error {
	switch f {
	case "table", "json":
		return nil
	}
	return fmt.Errorf("--format %q: want table or json", f)
}

// parseCommand is parseFlags, then checkFormat of the parsed format, for a
// command that takes arguments (withArgs) or none; it prints what is wrong
// as the command ("docker rdma ls: ...") and returns exitUsage (0 after
// printing the help, as parseFlags).
func parseCommand(s *session, fs *flag.FlagSet, format *string, args []string, withArgs bool) (rest []string, status int, ok bool) {
	if rest, status, ok = parseFlags(fs, args, s.env.Stdout); !ok {
		return nil, status, false
	}
	if len(rest) > 0 && !withArgs {
		tprintf(s.env.Stderr, "%s: unexpected argument %q\n", fs.Name(), rest[0])
		return nil, exitUsage, false
	}
	if err := checkFormat(*format); err != nil {
		tprintf(s.env.Stderr, "%s: %v\n", fs.Name(), err)
		return nil, exitUsage, false
	}
	return rest, 0, true
}
