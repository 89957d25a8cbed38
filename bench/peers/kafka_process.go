package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// With -broker-process each broker runs in a child process (this same
// executable, told so by brokerEnv), as `idemlog serve` runs apart from
// its clients: each side then has its own heap and GC (in one process a
// broker whose records live in the heap, as kfake's do, raises the GC goal
// for the client too), and the broker's CPU time is measured alone: the
// parent asks for it with a line "cpu" on the child's stdin, the child
// answers its getrusage total in nanoseconds (/proc/PID/stat counts in 10
// ms ticks, too coarse for phases of a few hundred milliseconds).

// brokerEnv carries "TARGET,PARTITIONS,DIR" to a child broker.
const brokerEnv = "PEERS_BROKER"

// maybeBroker runs the child broker and exits if this process is one.
func maybeBroker() {
	spec := os.Getenv(brokerEnv)
	if spec == "" {
		return
	}
	if err := serveBroker(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "peers broker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveBroker starts the broker spec names, writes its address as one
// line to out, answers "cpu" lines, and closes the broker when in reaches
// EOF (the parent is done).
func serveBroker(spec string, in io.Reader, out io.Writer) error {
	f := strings.SplitN(spec, ",", 3)
	if len(f) != 3 {
		return fmt.Errorf("cannot parse %s=%q", brokerEnv, spec)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return fmt.Errorf("cannot parse partitions %q: %w", f[1], err)
	}
	ts, err := kafkaTargets([]string{f[0]}, f[2])
	if err != nil {
		return err
	}
	b, err := ts[0].start(kafkaTopic, n)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, b.addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() == "cpu" {
			fmt.Fprintln(out, int64(cpuTime()))
		}
	}
	return errors.Join(sc.Err(), b.close())
}

// procBroker is a broker in a child process.
type procBroker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	a      string
}

// startProcBroker starts target t with a topic of n partitions in a child.
func startProcBroker(t target, n int, dir string) (broker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find own executable: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", brokerEnv, t.name, n, dir))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot make broker pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot make broker pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start broker process: %w", err)
	}
	p := &procBroker{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout)}
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		p.close()
		return nil, fmt.Errorf("cannot read broker address: %w", err)
	}
	p.a = strings.TrimSpace(line)
	return p, nil
}

func (p *procBroker) addr() string { return p.a }

func (p *procBroker) close() error {
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("broker process: %w", err)
	}
	return nil
}

// cpu returns the child's CPU time so far, user plus system.
func (p *procBroker) cpu() (time.Duration, error) {
	if _, err := io.WriteString(p.stdin, "cpu\n"); err != nil {
		return 0, fmt.Errorf("cannot ask broker cpu time: %w", err)
	}
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("cannot read broker cpu time: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse broker cpu time %q: %w", line, err)
	}
	return time.Duration(ns), nil
}
