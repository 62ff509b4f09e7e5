package cluster

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/example/webapp-operator/test/testutil"
)

func TestParseStartTimeCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	// A command name may hold spaces and parentheses: "(a) b)" must not shift the fields.
	stat := "4242 ((a) b)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200"
	got, err := parseStartTime(stat)
	if err != nil || got != 987654 {
		t.Fatalf("parseStartTime = %d, %v; want 987654", got, err)
	}
	if _, err := parseStartTime("4242 (x) S 1 2"); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
}

func TestCheckIdentity(t *testing.T) {
	rec := ProcessRecord{PID: 4242, Command: "localcluster serve real", StartTime: 1000, BootID: "boot-a", NetNS: "net:[400]"}
	live := procInfo{pid: 4242, command: "localcluster serve real", startTime: 1000, netNS: "net:[400]"}
	reused := live
	reused.command, reused.startTime = "sleep 600", 2000
	cases := []struct {
		name              string
		p                 procInfo
		boot              string
		caller, machine   string
		want              string // "" accepts; else a part of the refusal
		wantReusedRefusal bool
	}{
		{name: "the recorded process", p: live, boot: "boot-a"},
		{name: "the recorded process in its private namespace", p: live, boot: "boot-a", caller: "net:[1]", machine: "net:[1]"},
		{name: "pid reused", p: reused, boot: "boot-a", want: "refusing process 4242 (sleep 600): it started at", wantReusedRefusal: true},
		{name: "pid reused, private", p: reused, boot: "boot-a", caller: "net:[1]", machine: "net:[1]", want: "its pid was reused", wantReusedRefusal: true},
		{name: "an earlier boot", p: live, boot: "boot-b", want: "from an earlier boot", wantReusedRefusal: true},
		{name: "in the machine's namespace", p: procInfo{pid: 4242, command: "x", startTime: 1000, netNS: "net:[1]"}, boot: "boot-a",
			caller: "net:[2]", machine: "net:[1]", want: "its network namespace net:[1] is the machine's"},
		{name: "in the caller's namespace", p: procInfo{pid: 4242, command: "x", startTime: 1000, netNS: "net:[2]"}, boot: "boot-a",
			caller: "net:[2]", machine: "net:[1]", want: "is this process's own"},
		{name: "in another namespace than recorded", p: procInfo{pid: 4242, command: "x", startTime: 1000, netNS: "net:[3]"}, boot: "boot-a",
			caller: "net:[2]", machine: "net:[1]", want: "is not the recorded net:[400]"},
		{name: "namespace unreadable", p: procInfo{pid: 4242, command: "x", startTime: 1000}, boot: "boot-a",
			caller: "net:[2]", machine: "net:[1]", want: "cannot be read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkIdentity(rec, tc.p, tc.boot, tc.caller, tc.machine)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
			var reusedErr *PIDReusedError
			if errors.As(err, &reusedErr) != tc.wantReusedRefusal {
				t.Fatalf("PIDReusedError = %v for %v", !tc.wantReusedRefusal, err)
			}
		})
	}
}

// writeRecord writes r as a record file in a new directory and returns its path.
func writeRecord(t *testing.T, r ProcessRecord) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pid")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerifyProcessRefusesAReusedPID(t *testing.T) {
	sleep := testutil.StartSleep(t)
	info, err := readProc(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := SelfRecord()
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's record, as `up` wrote it, of a process that died; the sleep got its pid.
	path := writeRecord(t, ProcessRecord{PID: sleep.Process.Pid, Command: "localcluster serve real",
		StartTime: info.startTime - 1, BootID: self.BootID, NetNS: "net:[4026532999]"})
	r, err := ReadProcessRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, private := range []bool{false, true} {
		err = VerifyProcess(r, private)
		var reused *PIDReusedError
		if !errors.As(err, &reused) {
			t.Fatalf("private=%v: VerifyProcess = %v, want a PIDReusedError", private, err)
		}
		want := "refusing process " + strconv.Itoa(sleep.Process.Pid) + " (sleep 600): it started at "
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the recorded process (localcluster serve real)") {
			t.Fatalf("refusal %q does not name the sleep and the recorded process", err)
		}
	}
	if again, err := readProc(sleep.Process.Pid); err != nil || again.startTime != info.startTime {
		t.Fatalf("the sleep is not alive and untouched: %+v, %v", again, err)
	}
}

func TestVerifyProcessAcceptsTheRecordedProcessOnlyOutsideTheCallersNamespace(t *testing.T) {
	sleep := testutil.StartSleep(t)
	info, err := readProc(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	r := ProcessRecord{PID: sleep.Process.Pid, Command: "sleep 600", StartTime: info.startTime, BootID: boot, NetNS: info.netNS}
	if err := VerifyProcess(r, false); err != nil {
		t.Fatalf("the recorded process refused: %v", err)
	}
	// It shares this test's network namespace: never entered as a private one.
	if err := VerifyProcess(r, true); err == nil {
		t.Fatal("a process in the caller's network namespace was accepted as a private one")
	}
}

func TestVerifyProcessOfAnExitedProcessIsNotRunning(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	self, err := SelfRecord()
	if err != nil {
		t.Fatal(err)
	}
	r := ProcessRecord{PID: cmd.Process.Pid, Command: "true", StartTime: 1, BootID: self.BootID}
	if err := VerifyProcess(r, false); !errors.Is(err, ErrNotRunning) {
		// The pid may already be someone else's: then it must be refused as reused, never accepted.
		var reused *PIDReusedError
		if !errors.As(err, &reused) {
			t.Fatalf("VerifyProcess = %v", err)
		}
	}
}

func TestReadProcessRecordRefusesAPlainPID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pid")
	if err := os.WriteFile(path, []byte("4242"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProcessRecord(path); err == nil || !strings.Contains(err.Error(), "is not a process record") {
		t.Fatalf("ReadProcessRecord of a bare pid = %v", err)
	}
}
