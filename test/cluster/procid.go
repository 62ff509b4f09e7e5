package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A pid alone does not name a process: after the process dies (SIGKILL, a crash) the kernel hands its pid to the
// next one. Whoever enters the network namespace of a recorded process, or signals it, first checks that the process
// of that pid is still the one recorded: same start time (clock ticks after boot, /proc/PID/stat field 22) in the
// same boot. For the real node it also checks that the process's network namespace is the recorded one and is
// neither the caller's nor the machine's, so that nothing ever "enters" the machine's own namespace.

// ProcessRecord is what a cluster's serving process records about itself, so that others can know it again.
type ProcessRecord struct {
	PID int `json:"pid"`
	// Command is its command line, for messages.
	Command string `json:"command"`
	// StartTime is when it started, in clock ticks after boot (/proc/PID/stat field 22).
	StartTime uint64 `json:"startTime"`
	// BootID is /proc/sys/kernel/random/boot_id: start times count from the boot.
	BootID string `json:"bootID"`
	// NetNS is its network namespace (the target of /proc/PID/ns/net, "net:[INODE]").
	NetNS string `json:"netns"`
}

// procInfo is what /proc says about a process.
type procInfo struct {
	pid       int
	command   string
	startTime uint64
	netNS     string
	// zombie: it has exited and waits for its parent to reap it (an init that does not reap leaves it so).
	zombie bool
}

// ErrNotRunning is returned by VerifyProcess when no process has the recorded pid.
var ErrNotRunning = errors.New("no process has the recorded pid")

// PIDReusedError is VerifyProcess's refusal of a process that is not the recorded one: the recorded process is gone
// and another has its pid.
type PIDReusedError struct {
	Record ProcessRecord
	// Command and StartTime are the other process's.
	Command   string
	StartTime uint64
	// OtherBoot: the record is from an earlier boot.
	OtherBoot bool
}

func (e *PIDReusedError) Error() string {
	if e.OtherBoot {
		return fmt.Sprintf("refusing process %d (%s): the record of %s is from an earlier boot of this machine; the pid "+
			"now belongs to another process", e.Record.PID, e.Command, e.Record.Command)
	}
	return fmt.Sprintf("refusing process %d (%s): it started at %s, the recorded process (%s) at %s: that one is gone "+
		"and its pid was reused", e.Record.PID, e.Command, startedAt(e.StartTime), e.Record.Command, startedAt(e.Record.StartTime))
}

// SelfRecord describes the calling process.
func SelfRecord() (ProcessRecord, error) { return RecordOf(os.Getpid()) }

// RecordOf describes the live process pid.
func RecordOf(pid int) (ProcessRecord, error) {
	info, err := readProc(pid)
	if err != nil {
		return ProcessRecord{}, err
	}
	boot, err := bootID()
	if err != nil {
		return ProcessRecord{}, err
	}
	return ProcessRecord{PID: info.pid, Command: info.command, StartTime: info.startTime, BootID: boot, NetNS: info.netNS}, nil
}

// WriteProcessRecord writes the calling process's record to path.
func WriteProcessRecord(path string) error {
	r, err := SelfRecord()
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadProcessRecord reads a record written by WriteProcessRecord.
func ReadProcessRecord(path string) (ProcessRecord, error) {
	var r ProcessRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil || r.PID <= 0 || r.StartTime == 0 || r.BootID == "" {
		return r, fmt.Errorf("%s is not a process record (pid, start time, boot id): %q", path, strings.TrimSpace(string(b)))
	}
	return r, nil
}

// VerifyProcess checks that the process of r.PID is the recorded one: ErrNotRunning when there is none, an error
// saying whose it is when its pid was reused. With private (the real node) its network namespace must also be the
// recorded one, and differ from the caller's and the machine's.
func VerifyProcess(r ProcessRecord, private bool) error {
	info, err := readProc(r.PID)
	if errors.Is(err, os.ErrNotExist) || err == nil && info.zombie {
		return ErrNotRunning
	}
	if err != nil {
		return err
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	// Who it is first: that needs no privilege.
	if err := checkIdentity(r, info, boot, "", ""); err != nil || !private {
		return err
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	machine, err := machineNamespace("net")
	if err != nil {
		return err
	}
	return checkIdentity(r, info, boot, self, machine)
}

// checkIdentity compares a live process with its record. callerNetNS and machineNetNS are empty unless the
// process must live in a private network namespace.
func checkIdentity(r ProcessRecord, p procInfo, boot, callerNetNS, machineNetNS string) error {
	if boot != r.BootID || p.startTime != r.StartTime {
		return &PIDReusedError{Record: r, Command: p.command, StartTime: p.startTime, OtherBoot: boot != r.BootID}
	}
	if callerNetNS == "" && machineNetNS == "" {
		return nil
	}
	switch {
	case p.netNS == "":
		return fmt.Errorf("refusing process %d (%s): its network namespace cannot be read", p.pid, p.command)
	case p.netNS == machineNetNS:
		return fmt.Errorf("refusing process %d (%s): its network namespace %s is the machine's, not a private one",
			p.pid, p.command, p.netNS)
	case p.netNS == callerNetNS:
		return fmt.Errorf("refusing process %d (%s): its network namespace %s is this process's own: entering it would "+
			"change nothing (already inside it?)", p.pid, p.command, p.netNS)
	case p.netNS != r.NetNS:
		return fmt.Errorf("refusing process %d (%s): its network namespace %s is not the recorded %s",
			p.pid, p.command, p.netNS, r.NetNS)
	}
	return nil
}

// readProc reads a live process's command, start time and network namespace; os.ErrNotExist when there is none.
func readProc(pid int) (procInfo, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, err
	}
	start, err := parseStartTime(string(b))
	if err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	info := procInfo{pid: pid, startTime: start, zombie: stateOf(string(b)) == "Z"}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		info.command = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	if info.command == "" { // a kernel thread or a zombie: its name
		info.command = "[" + commOf(string(b)) + "]"
	}
	// Unreadable for a zombie; the caller refuses what it needs and cannot read.
	info.netNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return info, nil
}

// parseStartTime returns field 22 of a /proc/PID/stat line. Field 2, the command name in parentheses, may hold
// spaces and parentheses itself: the fields after it are counted from the last ')'.
func parseStartTime(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	fields := strings.Fields(stat[i+1:]) // fields 3, 4, ...
	if len(fields) < 20 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 20", len(fields))
	}
	return strconv.ParseUint(fields[22-3], 10, 64)
}

// stateOf is field 3 of a /proc/PID/stat line (R, S, D, Z, ...).
func stateOf(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if f := strings.Fields(stat[i+1:]); i >= 0 && len(f) > 0 {
		return f[0]
	}
	return ""
}

// commOf is field 2 of a /proc/PID/stat line without its parentheses.
func commOf(stat string) string {
	i, j := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if i < 0 || j < i {
		return "?"
	}
	return stat[i+1 : j]
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// startedAt is a start time in clock ticks after boot as a UTC time, when the boot time can be read.
func startedAt(ticks uint64) string {
	b, err := os.ReadFile("/proc/stat")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "btime" {
				if btime, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					t := time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / clockTicks)
					return t.UTC().Format("2006-01-02 15:04:05.00 UTC")
				}
			}
		}
	}
	return fmt.Sprintf("%d ticks after boot", ticks)
}
