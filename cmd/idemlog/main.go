// Command idemlog is the command-line tool of the idemlog log engine. Each
// subcommand lives in its own file and registers itself in commands; the
// work itself is done by library packages, so that tests and embedders get
// the same behaviour as the command line.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// Exit statuses, following the usual convention: 2 means the command line
// itself was wrong, so scripts can tell "bad invocation" from "bad data".
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

type command struct {
	name    string
	summary string
	// run gets the arguments after the subcommand name and returns the
	// exit status.
	run func(args []string, stdout, stderr io.Writer) int
}

// commands is filled in init so that help, which lists commands, can be
// reached from the commands themselves without an initialization cycle.
var commands []command

func init() {
	commands = []command{
		{"dump", "print the record batches of Kafka segments and their index entries", runDump},
		{"verify", "check segments, indexes and offset continuity of partitions", runVerify},
		{"bench", "generate load on an embedded engine and measure throughput and latency", runBench},
		{"serve", "serve the Kafka protocol for unmodified Kafka clients", runServe},
		{"mirror", "copy topics exactly once between idemlog data dirs and Kafka clusters", runMirror},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "idemlog: missing command")
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "--version", "-version":
		info, ok := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionString(info, ok))
		return exitOK
	case "help":
		if len(args) > 1 {
			// "idemlog help dump" is "idemlog dump --help".
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "idemlog: unknown flag %s (flags follow the command)\n", name)
	} else {
		fmt.Fprintf(stderr, "idemlog: unknown command %q\n", name)
	}
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: idemlog <command> [flags] [args]

idemlog is an embeddable Kafka-compatible log engine; this tool works on its
files, which are Kafka log segments byte for byte.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'idemlog <command> --help' for a command's flags; 'idemlog --version'
says which build this is.

Output: dump, verify and bench are tools run by a person, and print text
for people on stdout (dump --json and bench --json print JSON for
programs), their errors on stderr. serve is a long-running process whose
messages are events for whatever collects its logs: it writes them on
stderr as structured lines (log/slog's key=value text: time=... level=...
msg=...), which log collectors parse without a grammar of their own, and
prints on stdout only the addresses it listens on, for scripts.
`)
}

// versionString describes the build: the module's version (a release tag,
// a pseudo-version from the VCS, or "(devel)") and, when the build
// recorded them, the commit, its time and whether the tree had changes.
func versionString(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "idemlog (no build information)\n"
	}
	var b strings.Builder
	v := info.Main.Version
	if v == "" {
		v = "(unknown version)"
	}
	fmt.Fprintf(&b, "idemlog %s", v)
	if info.Main.Path != "" {
		fmt.Fprintf(&b, " (%s)", info.Main.Path)
	}
	b.WriteString("\n")
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "%s commit %s", settings["vcs"], rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, ", %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "built with %s", info.GoVersion)
	if goos, goarch := settings["GOOS"], settings["GOARCH"]; goos != "" && goarch != "" {
		fmt.Fprintf(&b, " for %s/%s", goos, goarch)
	}
	b.WriteString("\n")
	return b.String()
}

// parseArgs parses flags that may come before or after the positional
// arguments, as GNU tools allow, which Go's flag package alone does not:
// it stops at the first non-flag. A "--" still ends flag parsing.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, gnuFlagError(err)
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// printFlags lists fs's flags GNU-style (--name) for a usage message;
// flag.PrintDefaults would show them with one dash.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		fmt.Fprintf(w, "  --%s%s\n      %s", f.Name, arg, help)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprint(w, "  -h, --help\n      show this help\n")
}

// commandUsage is a subcommand's usage text: a synopsis always, the
// flags, and with --help (full) what it does and the details.
type commandUsage struct {
	name, synopsis, about, details string
}

// print writes the usage for --help (full, to stdout) or after a mistake
// (short enough that the error above it stays in view).
func (u commandUsage) print(w io.Writer, fs *flag.FlagSet, full bool) {
	fmt.Fprint(w, u.synopsis)
	if full {
		fmt.Fprint(w, u.about)
	}
	fmt.Fprint(w, "\nFlags:\n")
	printFlags(w, fs)
	if full {
		fmt.Fprint(w, u.details)
	} else {
		fmt.Fprintf(w, "\nRun 'idemlog %s --help' for more.\n", u.name)
	}
}

// newFlagSet returns a FlagSet that reports nothing itself: the caller
// decides where usage goes (stdout for --help, stderr for mistakes).
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}
