package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// sleepRecorded starts a sleep, a live process that is not the cluster's, and writes the cluster's record into a
// new state directory with the sleep's pid: as the cluster's serving process died and the sleep got its pid when
// reused is set, as if the sleep were the serving process otherwise.
func sleepRecorded(t *testing.T, reused bool) (dir string, sleep *exec.Cmd) {
	t.Helper()
	sleep = testutil.StartSleep(t)
	r, err := cluster.RecordOf(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if reused {
		r.Command, r.StartTime, r.NetNS = "localcluster serve real", r.StartTime-1, "net:[4026532999]"
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(recordFile(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, sleep
}

// stillRunning fails the test unless the sleep has not exited (a signal would have ended it).
func stillRunning(t *testing.T, sleep *exec.Cmd) {
	t.Helper()
	var status syscall.WaitStatus
	pid, err := syscall.Wait4(sleep.Process.Pid, &status, syscall.WNOHANG, nil)
	if pid != 0 || err != nil {
		t.Fatalf("the sleep was signalled: wait4 = %d, %v, %v", pid, status, err)
	}
}

func TestDownRefusesAReusedPIDAndSignalsNothing(t *testing.T) {
	for _, realNode := range []bool{false, true} {
		dir, sleep := sleepRecorded(t, true)
		if err := down(dir, realNode); err != nil {
			t.Fatalf("down: %v", err)
		}
		stillRunning(t, sleep)
		if _, err := os.Stat(recordFile(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the stale record stays: %v", err)
		}
	}
}

func TestExecAndPIDRefuseAReusedPID(t *testing.T) {
	dir, sleep := sleepRecorded(t, true)
	for name, run := range map[string]func() error{
		"exec": func() error { return execIn(dir, []string{"true"}) },
		"pid":  func() error { return printPID(dir, true) },
	} {
		err := run()
		if err == nil {
			t.Fatalf("%s: accepted a reused pid", name)
		}
		for _, part := range []string{filepath.Join(dir, "pid") + ": refusing process ", " (sleep 600): it started at ",
			"the recorded process (localcluster serve real) at ", "its pid was reused; nothing was entered or signalled"} {
			if !strings.Contains(err.Error(), part) {
				t.Fatalf("%s: refusal %q lacks %q", name, err, part)
			}
		}
	}
	stillRunning(t, sleep)
}

func TestExecRefusesAProcessInTheCallersNetworkNamespace(t *testing.T) {
	// The recorded process itself, but in this test's network namespace (the machine's, or the caller's):
	// entering it would send the command's requests from here.
	dir, sleep := sleepRecorded(t, false)
	err := execIn(dir, []string{"true"})
	if err == nil || !strings.Contains(err.Error(), "; nothing was entered or signalled") {
		t.Fatalf("exec into the caller's namespace = %v", err)
	}
	if os.Geteuid() == 0 && !strings.Contains(err.Error(), "is the machine's, not a private one") &&
		!strings.Contains(err.Error(), "is this process's own") {
		t.Fatalf("refusal %q does not say why", err)
	}
	stillRunning(t, sleep)
}
