// Package realnode runs the operator the way users do, on a cluster with a real node: its image built from the
// project's Dockerfile, installed with `make deploy`, managing WebApps whose pods really run (containerd, runc),
// are probed by the kubelet and answer through their Service (kube-proxy). The whole cluster lives in a network
// and mount namespace of its own (see test/cluster/namespace.go); it needs root.
package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/webapp-operator/test/cluster"
)

// Passed from the run outside the namespace to the run inside it. WEBAPP_REALNODE_IMAGES set by the caller (the
// image tarballs test/images/build.sh printed, comma-separated) is used instead of building them.
const (
	envDir    = "WEBAPP_REALNODE_DIR"
	envImages = "WEBAPP_REALNODE_IMAGES"
)

var (
	lc      *cluster.Cluster
	workDir string
)

func TestMain(m *testing.M) {
	inside, err := cluster.InPrivateNamespace()
	if err != nil || os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "the real-node tests need root (namespaces, mounts, cgroups): %v\n", err)
		os.Exit(1)
	}
	if inside {
		os.Exit(runInside(m))
	}
	os.Exit(runOutside())
}

// runOutside takes the machine's real-node lock (waiting for another run to end, up to $WEBAPP_REALNODE_WAIT,
// default 10m), builds the images (the builds fetch Go modules, which the node's namespace cannot), then runs this
// test binary again inside a new network and mount namespace, where the cluster and the tests run.
func runOutside() int {
	start := time.Now()
	wait := 10 * time.Minute
	if v := os.Getenv("WEBAPP_REALNODE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "WEBAPP_REALNODE_WAIT=%q: %v\n", v, err)
			return 1
		}
		wait = d
	}
	lock, err := cluster.LockNode(cluster.NodeLockPath(), wait, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "real-node tests: %v\n", err)
		return 1
	}
	defer func() { _ = lock.Release() }()
	if time.Since(start) > time.Second {
		fmt.Printf("realnode: waited %v for the real-node lock\n", time.Since(start).Round(time.Second))
	}
	dir, err := os.MkdirTemp("", "webapp-realnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// helm, for the chart's tests, is built here too: the node's namespace reaches no module proxy.
	if _, err := cluster.Tool(cluster.HelmCommand); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Images built already (make test builds them in the background while the other suites run) are taken as
	// they are; otherwise they are built now.
	images := strings.FieldsFunc(os.Getenv(envImages), func(r rune) bool { return r == ',' })
	if len(images) == 0 && os.Getenv(cluster.EnvNoBuild) == "1" {
		fmt.Fprintf(os.Stderr, "real-node tests: %s names no images, and %s=1 says a suite builds nothing (make test builds them in the background before this suite starts)\n", envImages, cluster.EnvNoBuild)
		return 1
	}
	if len(images) == 0 {
		if images, err = cluster.BuildImages(filepath.Join(dir, "images")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("realnode: images built in %v\n", time.Since(start).Round(time.Second))
	}
	cmd := cluster.InNamespaceCommand(true, os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), envDir+"="+dir, envImages+"="+strings.Join(images, ","))
	err = cluster.RunInNamespace(cmd, lock)
	fmt.Printf("realnode: images, cluster and tests took %v\n", time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintf(os.Stderr, "real-node tests failed (%v); logs are in %s\n", err, dir)
		return 1
	}
	_ = os.RemoveAll(dir)
	return 0
}

// runInside starts the cluster with the real node, deploys the operator with `make deploy` and runs the tests.
func runInside(m *testing.M) int {
	workDir = os.Getenv(envDir)
	if workDir == "" {
		fmt.Fprintln(os.Stderr, envDir+" is not set: run the real-node tests with go test, not inside a namespace of your own")
		return 1
	}
	start := time.Now()
	var err error
	lc, err = cluster.StartReal(context.Background(), cluster.Options{
		Dir: filepath.Join(workDir, "cluster"), DieWithParent: true, Images: strings.Split(os.Getenv(envImages), ","),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the cluster with a real node: %v\n", err)
		return 1
	}
	fmt.Printf("realnode: cluster ready in %v:%s\n", time.Since(start).Round(100*time.Millisecond), timings(lc.Timings))
	code := 1
	// The chart's lifecycle with helm first, on the fresh cluster (it leaves it as it found it); its test reports it.
	helmRun.err = helmLifecycle()
	for _, s := range helmRun.steps {
		fmt.Printf("realnode: helm: %s\n", s)
	}
	fmt.Printf("realnode: the helm lifecycle ran in %v (error: %v)\n", time.Since(start).Round(100*time.Millisecond), helmRun.err)
	// The operator before v2 with WebApps of its own first, then this one the way docs/api.md upgrades
	// (upgrade_test.go checks that the upgrade was a non-event).
	oldDir, err := deployBeforeV2()
	if err == nil {
		fmt.Printf("realnode: the operator before v2 deployed in %v\n", time.Since(start).Round(100*time.Millisecond))
		upgrade, err = prepareUpgrade(oldDir)
	}
	if err == nil {
		err = deployOperator()
	}
	if err == nil {
		err = upgrade.finish()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		fmt.Printf("realnode: operator deployed from its image in %v\n", time.Since(start).Round(100*time.Millisecond))
		suite := time.Now()
		code = m.Run()
		fmt.Printf("realnode: tests took %v\n", time.Since(suite).Round(100*time.Millisecond))
	}
	if err := lc.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the cluster: %v\n", err)
		code = 1
	}
	return code
}

func timings(ts []cluster.Timing) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, " %s %v,", t.Step, t.Took.Round(100*time.Millisecond))
	}
	return strings.TrimSuffix(b.String(), ",")
}

// deployOperator runs `make deploy` (CRD, RBAC, the namespace with restricted Pod Security enforced, the
// operator's Deployment with its image as shipped) and waits for the operator's Deployment to become available.
func deployOperator() error {
	cmd := exec.Command("make", "--no-print-directory", "deploy")
	cmd.Dir = cluster.RepoRoot()
	cmd.Env = kubectlEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make deploy: %w\n%s", err, out)
	}
	_, err := kubectlErr("wait", "--for=condition=Available", "--timeout=120s", "-n", operatorNS, "deployment/webapp-operator")
	return err
}

// kubectlEnv puts the cluster's kubectl first on PATH and its kubeconfig in KUBECONFIG.
// kubectl's discovery cache is this run's own: a cache from an earlier run at the same address would name versions
// this cluster does not serve.
func kubectlEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+lc.Kubeconfig, "PATH="+lc.Bin+":"+os.Getenv("PATH"),
		"KUBECACHEDIR="+filepath.Join(workDir, "kubectl-cache"))
}

// kubectl runs kubectl and returns its stdout; a failure fails the test with stderr.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlErr runs kubectl and returns stdout, or an error carrying the command and stderr.
func kubectlErr(args ...string) (string, error) {
	return kubectlIn("", args...)
}

// kubectlIn runs kubectl with stdin.
func kubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(lc.Bin, "kubectl"), args...)
	cmd.Env = kubectlEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// apply applies a manifest with Server-Side Apply.
func apply(t *testing.T, manifest string) {
	t.Helper()
	if _, err := kubectlIn(manifest, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// poll checks every 250 ms until check returns nil, or returns its last error after timeout.
func poll(timeout time.Duration, what string, check func() error) error {
	last := errors.New("never checked")
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: not true after %v: %w", what, timeout, last)
	}
	return nil
}

// eventually polls check every 250 ms until it returns nil, failing the test with its last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(timeout, what, check); err != nil {
		t.Fatal(err)
	}
}

// jsonpath returns `kubectl get ARGS -o jsonpath=PATH`.
func jsonpath(t *testing.T, path string, args ...string) string {
	t.Helper()
	return kubectl(t, append(append([]string{"get"}, args...), "-o", "jsonpath="+path)...)
}

// jsonpathEquals polls until `kubectl get ARGS -o jsonpath=PATH` prints want.
func jsonpathEquals(t *testing.T, timeout time.Duration, want, path string, args ...string) {
	t.Helper()
	eventually(t, timeout, strings.Join(args, " ")+" "+path+" = "+want, func() error {
		got, err := kubectlErr(append(append([]string{"get"}, args...), "-o", "jsonpath="+path)...)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}
