package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// Every message of the flag package that names a flag names it as the
// usage shows it, --name, whatever the dashes typed; other errors pass
// unchanged, flag.ErrHelp included.
func TestGNUFlagError(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("count", 0, "")
	fs.Bool("json", false, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "flag provided but not defined: --nope"},
		{[]string{"-nope"}, "flag provided but not defined: --nope"},
		{[]string{"--count"}, "flag needs an argument: --count"},
		{[]string{"--count", "x"}, `invalid value "x" for flag --count: parse error`},
		{[]string{"--count=x: -y"}, `invalid value "x: -y" for flag --count: parse error`},
		{[]string{"--json=maybe"}, `invalid boolean value "maybe" for --json: parse error`},
		{[]string{"---count=1"}, "bad flag syntax: ---count=1"},
	} {
		err := gnuFlagError(fs.Parse(c.args))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	if err := gnuFlagError(fs.Parse([]string{"--help"})); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
	if err := gnuFlagError(nil); err != nil {
		t.Errorf("nil: %v", err)
	}
	other := errors.New("unexpected argument")
	if err := gnuFlagError(other); err != other {
		t.Errorf("another error became %v", err)
	}
	if strings.Contains(gnuFlagError(errors.New("flag provided but not defined: -x")).Error(), " -x") {
		t.Errorf("single dash kept")
	}
}
