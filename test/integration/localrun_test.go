package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// TestMakeRunServesV1OnAnotherCluster is the README's first experiment on a cluster that is not the project's
// harness: an API server that nobody serves conversion for, the CRD installed as `make install` installs it
// (conversion by the deployed operator's Service, which is not there). Before `make run`, a v1 apply fails; while
// `make run` runs, the seed's v1 example applies, reads and lists in both versions, and the operator writes its
// children; after Ctrl-C, the CRD's conversion is what it was. A run that is killed leaves what to put back in the
// CRD's annotation, and the next run puts it back when it stops.
func TestMakeRunServesV1OnAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	env, err := cluster.NewEnvtest(filepath.Join(dir, "logs"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "developer", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.EnvtestBin()
	if err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	environ := append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"), fmt.Sprintf("WEBHOOK_PORT=%d", port))
	root := cluster.RepoRoot()
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command("kubectl", args...)
		cmd.Env, cmd.Dir = environ, root
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	must("apply", "--server-side", "-k", "manifests/crd")
	testutil.WaitEstablished(t, kubectl, "crd/webapps.example.com")
	conversionNow := func() string { return must("get", "crd", conversion.CRDName, "-o", "jsonpath={.spec.conversion}") }
	before := conversionNow()
	example := filepath.Join("manifests", "examples", "nginx-webapp.yaml")
	if out, err := kubectl("apply", "--server-side", "-f", example); err == nil || !strings.Contains(out, "conversion webhook") {
		t.Fatalf("before make run, a v1 apply: %v\n%s", err, out)
	}

	// make run, in a process group of its own as a terminal's foreground job; Ctrl-C is a SIGINT to the group.
	start := func() (*exec.Cmd, *bytes.Buffer) {
		var out bytes.Buffer
		cmd := exec.Command("make", "--no-print-directory", "run", "ARGS=--metrics-bind-address=0 --health-probe-bind-address=0")
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = environ, root, &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		return cmd, &out
	}
	stop := func(cmd *exec.Cmd, out *bytes.Buffer, sig syscall.Signal) {
		t.Helper()
		if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Logf("make run ended after %v: %v", sig, err)
		case <-time.After(cluster.Patience(90 * time.Second)):
			t.Fatalf("make run did not stop within %v of %v:\n%s", cluster.Patience(90*time.Second), sig, out)
		}
	}
	// The apply of the seed's example succeeds once the CRD points at the manager. make run finds bin/manager built
	// (make test's build phase; the suite's go refuses a compile), so this waits on the manager's start alone.
	waitApplies := func(cmd *exec.Cmd, out *bytes.Buffer) {
		t.Helper()
		var last string
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, cluster.Patience(4*time.Minute), true, func(context.Context) (bool, error) {
			if cmd.ProcessState != nil {
				return false, errors.New("make run exited")
			}
			o, err := kubectl("apply", "--server-side", "-f", example)
			last = o
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the v1 example did not apply during make run: %v (last: %s)\n%s", err, last, out)
		}
	}

	cmd, out := start()
	waitApplies(cmd, out)
	// Reads and lists in both versions; the v2 form says what the v1 manifest said.
	must("get", "webapps.v1.example.com", "nginx-app", "-o", "yaml")
	must("get", "webapps.v1.example.com", "-A")
	if got := must("get", "webapps.v2.example.com", "nginx-app", "-o", "jsonpath={.spec.replicas} {.spec.ports[0].port} {.spec.pod.security}"); got != "3 80 Baseline" {
		t.Errorf("the example read as v2: %q", got)
	}
	// The operator runs: the Deployment appears (there is no kube-controller-manager here to run its pods).
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		_, err := kubectl("get", "deployment", "nginx-app")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no Deployment from make run's operator:\n%s", out)
	}
	stop(cmd, out, syscall.SIGINT)
	if now := conversionNow(); now != before {
		t.Errorf("after Ctrl-C the CRD's conversion is\n%s\nnot, as before make run,\n%s\n%s", now, before, out)
	}
	if a := must("get", "crd", conversion.CRDName, "-o", "jsonpath={.metadata.annotations}"); strings.Contains(a, conversion.SavedConversionAnnotation) {
		t.Errorf("annotations left after Ctrl-C: %s", a)
	}

	// Killed: the CRD still points at the dead run, and its annotation says what to put back; the next run puts
	// it back when it stops.
	cmd, out = start()
	waitApplies(cmd, out)
	stop(cmd, out, syscall.SIGKILL)
	if saved := must("get", "crd", conversion.CRDName, "-o", "go-template={{index .metadata.annotations \""+conversion.SavedConversionAnnotation+"\"}}"); saved != before {
		t.Errorf("after a killed run the annotation says %q, want %q", saved, before)
	}
	cmd, out = start()
	waitApplies(cmd, out)
	stop(cmd, out, syscall.SIGINT)
	if now := conversionNow(); now != before {
		t.Errorf("after a killed run and a stopped one the CRD's conversion is\n%s\nwant\n%s\n%s", now, before, out)
	}
}
