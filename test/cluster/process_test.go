package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestKwokStartedAgainOnlyAfterItsRace runs a stand-in for kwok (a shell script) that aborts as kwok's known race
// does, or fails otherwise, and checks that only the race is started again, at most raceRestarts times.
func TestKwokStartedAgainOnlyAfterItsRace(t *testing.T) {
	for _, tc := range []struct {
		name string
		// script runs as the component; $1 is a file it appends a line to on each start.
		script string
		name2  string // the component's name
		starts int    // how many times it is started in all
		alive  bool   // still running at the end
	}{
		{"race once, then runs", `echo x >>"$1"; [ "$(wc -l <"$1")" -gt 1 ] && exec sleep 60; echo "fatal error: concurrent map writes"; exit 2`, "kwok", 2, true},
		{"race every time", `echo x >>"$1"; echo "fatal error: concurrent map writes"; exit 2`, "kwok", 1 + raceRestarts, false},
		{"race once, then another failure", `echo x >>"$1"; [ "$(wc -l <"$1")" -gt 1 ] && exit 1; echo "fatal error: concurrent map writes"; exit 2`, "kwok", 2, false},
		{"another failure", `echo x >>"$1"; echo "unknown flag"; exit 1`, "kwok", 1, false},
		{"the race in another component", `echo x >>"$1"; echo "fatal error: concurrent map writes"; exit 2`, "kube-scheduler", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "component.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			startsFile := filepath.Join(dir, "starts")
			c := &Cluster{LogDir: dir}
			if err := c.startPath(tc.name2, script, []string{startsFile}, true); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Stop() }()
			starts := func() int {
				b, _ := os.ReadFile(startsFile)
				return strings.Count(string(b), "x")
			}
			// Wait until it has been started as often as expected, then a little: a further start would show.
			err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(_ context.Context) (bool, error) {
				return starts() >= tc.starts, nil
			})
			if err != nil {
				t.Fatalf("started %d times, want %d", starts(), tc.starts)
			}
			if !tc.alive {
				select {
				case <-c.procs[0].done:
				case <-time.After(10 * time.Second):
					t.Fatal("still running, want it to have exited for good")
				}
			} else if err := c.exited(); err != nil {
				t.Fatalf("exited, want it running: %v", err)
			}
			if got := starts(); got != tc.starts {
				t.Fatalf("started %d times, want %d", got, tc.starts)
			}
			log, _ := os.ReadFile(filepath.Join(dir, tc.name2+".log"))
			if said := strings.Count(string(log), "starting it again"); said != tc.starts-1 {
				t.Errorf("its log says %d restarts, want %d:\n%s", said, tc.starts-1, log)
			}
		})
	}
}
