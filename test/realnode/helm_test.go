package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

// helmRun is what helmLifecycle saw: it runs in TestMain, on the fresh cluster, before the kustomize install the
// other tests use; TestHelmInstallUpgradeUninstallAndANamespacedInstall reports it.
var helmRun struct {
	err   error
	steps []string
}

const (
	helmNS     = "webapp-helm" // the release's namespace
	helmAppsNS = "helm-apps"   // its WebApps'
)

// helmLifecycle installs the chart of the previous commit with helm (built from its module), upgrades to this
// commit's chart, uninstalls, installs again, and then installs a namespaced release; after each step the operator
// reconciles a WebApp (and after the uninstall, the WebApps and their apps are still there, unmanaged). It leaves
// the cluster as it found it (no CRD, no release).
func helmLifecycle() error {
	start := time.Now()
	step := func(format string, args ...any) {
		helmRun.steps = append(helmRun.steps, fmt.Sprintf("%5.1fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	home := filepath.Join(workDir, "helm")
	helm := func(args ...string) error {
		_, err := cluster.Helm(home, kubectlEnv(), args...)
		return err
	}
	image := []string{"--set", "image.repository=webapp-operator", "--set", "image.tag=dev"}
	defer cleanupHelm(helm)

	previous, rev, err := previousChart()
	if err != nil {
		return err
	}
	for _, ns := range []string{helmNS, helmAppsNS} {
		if err := restrictedNamespace(ns); err != nil {
			return err
		}
	}
	// 1. Install the previous commit's chart; the operator reconciles a WebApp.
	t0 := time.Now()
	if err := helm(append([]string{"install", "webapp-operator", previous, "-n", helmNS, "--wait", "--timeout=3m"}, image...)...); err != nil {
		return err
	}
	step("helm install (the chart of %s): deployed and available in %.1fs", rev, time.Since(t0).Seconds())
	if err := helmWebApp("first", 1, "first WebApp Ready under the installed release"); err != nil {
		return err
	}
	step("a WebApp Ready under it")

	// 2. Upgrade to this commit's chart (the CRD too); the operator reconciles a change and a new WebApp.
	t0 = time.Now()
	if err := helm(append([]string{"upgrade", "webapp-operator", cluster.ChartDir(), "-n", helmNS, "--wait", "--timeout=3m"}, image...)...); err != nil {
		return err
	}
	step("helm upgrade to this commit's chart: done in %.1fs", time.Since(t0).Seconds())
	if err := helmWebApp("first", 2, "first WebApp scaled to 2 after the upgrade"); err != nil {
		return err
	}
	if err := helmWebApp("second", 1, "a second WebApp Ready after the upgrade"); err != nil {
		return err
	}
	step("after it, a change reconciled and a new WebApp Ready")

	// 3. Uninstall: the CRD (crds.keep), the WebApps and their apps stay; nothing of the operator does.
	t0 = time.Now()
	if err := helm("uninstall", "webapp-operator", "-n", helmNS, "--wait", "--timeout=3m"); err != nil {
		return err
	}
	step("helm uninstall: done in %.1fs", time.Since(t0).Seconds())
	if err := afterUninstall(); err != nil {
		return err
	}
	step("after it: the CRD, both WebApps and their Deployments (3 available pods) are still there; no operator Deployment, ClusterRole or webhook Service")

	// 4. Install again, over the kept CRD: the operator takes up its WebApps.
	if err := helm(append([]string{"install", "webapp-operator", cluster.ChartDir(), "-n", helmNS, "--wait", "--timeout=3m"}, image...)...); err != nil {
		return err
	}
	if err := helmWebApp("first", 1, "first WebApp scaled back to 1 after the new install"); err != nil {
		return err
	}
	step("helm install again over the kept CRD: a change reconciled")
	if err := helm("uninstall", "webapp-operator", "-n", helmNS, "--wait", "--timeout=3m"); err != nil {
		return err
	}
	if _, err := kubectlErr("delete", "crd", "webapps.example.com", "--timeout=2m"); err != nil {
		return err
	}

	// 5. A namespaced install.
	if err := namespacedInstall(helm, image); err != nil {
		return err
	}
	step("namespaced release in team-ops watching team-a and team-c: their WebApps Ready, team-b's left alone, no error in the operator's log, no right outside its namespaces but the CRD's")
	return nil
}

// previousChart extracts the chart of the commit before HEAD into the work directory.
func previousChart() (dir, rev string, err error) {
	out, err := exec.Command("git", "-C", cluster.RepoRoot(), "rev-parse", "--short", "HEAD~1").Output()
	if err != nil {
		return "", "", fmt.Errorf("git rev-parse HEAD~1: %w", err)
	}
	rev = strings.TrimSpace(string(out))
	dir = filepath.Join(workDir, "chart-"+rev)
	archive := exec.Command("sh", "-c", `mkdir -p "$3" && git -C "$1" archive "$2" manifests/chart/webapp-operator | tar -x -C "$3"`,
		"sh", cluster.RepoRoot(), rev, dir)
	if b, err := archive.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("the chart of %s (the previous commit): %w\n%s", rev, err, b)
	}
	return filepath.Join(dir, "manifests", "chart", "webapp-operator"), rev, nil
}

// helmWebApp applies WebApp name in helm-apps with replicas and waits until it is Ready with them all available.
func helmWebApp(name string, replicas int, what string) error {
	return webAppIn(helmAppsNS, name, replicas, what)
}

func webAppIn(ns, name string, replicas int, what string) error {
	if err := applyWebAppIn(ns, name, replicas); err != nil {
		return err
	}
	return poll(2*time.Minute, what, func() error {
		got, err := kubectlErr("get", "-n", ns, "webapp/"+name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.availableReplicas} {.status.observedGeneration}/{.metadata.generation}`)
		if err != nil {
			return err
		}
		f := strings.Fields(got)
		if len(f) != 3 || f[0] != "True" || f[1] != fmt.Sprint(replicas) || !sameGeneration(f[2]) {
			return fmt.Errorf("Ready, available, generation: %q", got)
		}
		return nil
	})
}

// applyWebAppIn applies a WebApp of the test web app (retrying while the CRD, applied a moment ago, is not served).
func applyWebAppIn(ns, name string, replicas int) error {
	manifest := webAppV2(ns, name, cluster.WebserverImage, replicas, "")
	return poll(time.Minute, "apply WebApp "+name, func() error {
		_, err := kubectlIn(manifest, "apply", "--server-side", "-f", "-")
		return err
	})
}

func sameGeneration(s string) bool {
	a, b, ok := strings.Cut(s, "/")
	return ok && a == b
}

// afterUninstall checks what helm uninstall left: the CRD, the WebApps and their apps, and nothing of the operator.
func afterUninstall() error {
	if _, err := kubectlErr("get", "crd", "webapps.example.com"); err != nil {
		return fmt.Errorf("the CRD is gone after helm uninstall (crds.keep): %w", err)
	}
	got, err := kubectlErr("get", "-n", helmAppsNS, "deployments", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.availableReplicas} {end}")
	if err != nil {
		return err
	}
	if got != "first=2 second=1 " {
		return fmt.Errorf("the apps after helm uninstall: %q, want first=2 second=1", got)
	}
	if got, err := kubectlErr("get", "-n", helmAppsNS, "webapps", "-o", "name"); err != nil || got != "webapp.example.com/first\nwebapp.example.com/second\n" {
		return fmt.Errorf("the WebApps after helm uninstall: %q, %w", got, err)
	}
	for _, o := range []string{"-n " + helmNS + " deployment/webapp-operator", "-n " + helmNS + " service/webapp-operator-webhook", "clusterrole/webapp-operator"} {
		if out, err := kubectlErr(append([]string{"get", "--ignore-not-found", "-o", "name"}, strings.Fields(o)...)...); err != nil || out != "" {
			return fmt.Errorf("%s after helm uninstall: %q, %w", o, out, err)
		}
	}
	return nil
}

// namespacedInstall installs release teams in namespace team-ops, watching team-a and team-c only: their WebApps
// are reconciled (the operator's own namespace is not watched, so its webhook certificate's Secret is read through
// the release's Role there), one in team-b is left alone, the operator logs no error, and it may do nothing
// outside its namespaces but the CRD's part.
func namespacedInstall(helm func(...string) error, image []string) error {
	for _, ns := range []string{"team-ops", "team-a", "team-b", "team-c"} {
		if err := restrictedNamespace(ns); err != nil {
			return err
		}
	}
	args := append([]string{"install", "teams", cluster.ChartDir(), "-n", "team-ops", "--set", "watchNamespaces={team-a,team-c}",
		"--set", "rbac.userRoles=false", "--wait", "--timeout=3m"}, image...)
	if err := helm(args...); err != nil {
		return err
	}
	if err := applyWebAppIn("team-b", "theirs", 1); err != nil {
		return err
	}
	for _, ns := range []string{"team-a", "team-c"} {
		if err := webAppIn(ns, "ours", 1, ns+"'s WebApp Ready under the namespaced release"); err != nil {
			return err
		}
	}
	// team-b's WebApp was created before the others became Ready: had the operator seen it, it would have made its
	// Deployment and status by now (the log check below finds no mention of it either).
	if out, err := kubectlErr("get", "-n", "team-b", "deployments", "-o", "name"); err != nil || out != "" {
		return fmt.Errorf("team-b's Deployments: %q, %w", out, err)
	}
	if out, err := kubectlErr("get", "-n", "team-b", "webapp/theirs", "-o", "jsonpath={.status}"); err != nil || out != "" {
		return fmt.Errorf("team-b's WebApp has a status: %q, %w", out, err)
	}
	sa := "system:serviceaccount:team-ops:teams-webapp-operator"
	for _, c := range []struct{ args, want string }{
		{"list webapps.example.com -n team-a", "yes"},
		{"patch deployments -n team-c", "yes"},
		{"list webapps.example.com -n team-b", "no"},
		{"list webapps.example.com -n team-ops", "no"},
		{"list deployments --all-namespaces", "no"},
		{"list namespaces", "no"},
		{"list secrets -n kube-system", "no"},
		{"update customresourcedefinitions/webapps.example.com", "yes"},
		{"update customresourcedefinitions/other.example.com", "no"},
	} {
		out, _ := kubectlErr(append([]string{"auth", "can-i", "--as=" + sa}, strings.Fields(c.args)...)...)
		if strings.TrimSpace(out) != c.want {
			return fmt.Errorf("can %s %s: %q, want %s", sa, c.args, strings.TrimSpace(out), c.want)
		}
	}
	logs, err := kubectlErr("logs", "-n", "team-ops", "-l", "app.kubernetes.io/instance=teams", "--tail=-1", "--prefix")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(logs, "\n") {
		if (strings.Contains(line, `"level":"error"`) && !startupRace(line)) || strings.Contains(strings.ToLower(line), "forbidden") ||
			strings.Contains(line, "team-b") {
			return fmt.Errorf("the namespaced operator logged an error, or team-b: %s", line)
		}
	}
	if err := helm("uninstall", "teams", "-n", "team-ops", "--wait", "--timeout=3m"); err != nil {
		return err
	}
	_, err = kubectlErr("delete", "crd", "webapps.example.com", "--timeout=2m")
	return err
}

// startupRace says whether an error line is one of the two races that two replicas starting at once always run, each
// logged at error level by the library that loses it and retried (cluster-wide installs log them too; docs/lifecycle.md "Leader
// election"): both create the leader election Lease, and the loser's client-go logs that it already exists; both write
// the first webhook certificate, and the loser's rotator logs the conflict.
func startupRace(line string) bool {
	for _, r := range []struct{ logger, err string }{
		{"leaderelection", `leases.coordination.k8s.io \"webapp-operator.example.com\" already exists`},
		{"cert-rotation", "the object has been modified"},
	} {
		if strings.Contains(line, `"logger":"`+r.logger+`"`) && strings.Contains(line, r.err) {
			return true
		}
	}
	return false
}

// cleanupHelm removes what helmLifecycle may have left after a failure: the releases, the CRD, the namespaces.
func cleanupHelm(helm func(...string) error) {
	_ = helm("uninstall", "webapp-operator", "-n", helmNS, "--ignore-not-found", "--wait", "--timeout=2m")
	_ = helm("uninstall", "teams", "-n", "team-ops", "--ignore-not-found", "--wait", "--timeout=2m")
	_, _ = kubectlErr("delete", "crd", "webapps.example.com", "--ignore-not-found", "--timeout=2m")
	_, _ = kubectlErr("delete", "namespace", helmNS, helmAppsNS, "team-ops", "team-a", "team-b", "team-c", "--ignore-not-found", "--wait=false")
	// kubectl's discovery cache knows the chart's CRD (v2 served): the next install's CRD may serve other versions.
	_ = os.RemoveAll(filepath.Join(workDir, "kubectl-cache"))
}

// The chart's lifecycle with helm, run before the other tests (helmLifecycle): the steps and their figures.
func TestHelmInstallUpgradeUninstallAndANamespacedInstall(t *testing.T) {
	for _, s := range helmRun.steps {
		t.Log(s)
	}
	if helmRun.err != nil {
		t.Fatal(helmRun.err)
	}
	if len(helmRun.steps) == 0 {
		t.Fatal("the helm lifecycle did not run")
	}
}
