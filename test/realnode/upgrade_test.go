package realnode

// The upgrade from the operator before API v2 to this one, done the way docs/api.md tells users (TestMain deploys the
// old operator and its WebApps first, then upgrades with `make deploy`), and the rollback to it. The tests here run
// last (this file sorts last, the rollback is its last test): after the rollback the old operator runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

const upgradeNS = "upgrade"

// upgradeApps are the WebApps created in v1 under the old operator, and watched through the upgrade.
var upgradeApps = []string{"keep-a", "keep-b"}

// upgrade is what was recorded before the upgrade, and what the watcher saw during it.
var upgrade *upgradeState

type upgradeState struct {
	before map[string]childState // by WebApp
	v1Spec map[string]string     // the WebApp's spec read as v1, JSON
	oldDir string                // the old release's tree (manifests/ with the before-v2 image)

	mu       sync.Mutex
	started  time.Time     // when the upgrade started
	took     time.Duration // until every WebApp was stored at v2
	stop     chan struct{}
	done     chan struct{}
	reads    int
	errors   int
	firstErr string
	errFrom  time.Time
	errTo    time.Time
	notReady []string
}

// childState is what must not change for a WebApp's app: its pods (UIDs and restarts), its Deployment's
// generation, and when our field manager last wrote its Deployment and Service.
type childState struct {
	pods       string
	generation string
	ourWrites  string
}

// deployBeforeV2 installs the operator of the last commit before v2 from that commit's own manifests (its image is
// webapp-operator:before-v2, built by test/images/build.sh from the same commit).
func deployBeforeV2() (string, error) {
	dir := filepath.Join(workDir, "before-v2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" manifests | tar -x -C "$3"`, "sh", cluster.RepoRoot(), cluster.BeforeV2, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extracting the manifests of %s: %w\n%s", cluster.BeforeV2, err, out)
	}
	deployment := filepath.Join(dir, "manifests", "manager", "deployment.yaml")
	data, err := os.ReadFile(deployment)
	if err != nil {
		return "", err
	}
	data = []byte(strings.ReplaceAll(string(data), "image: webapp-operator:dev", "image: "+cluster.BeforeV2Image))
	if err := os.WriteFile(deployment, data, 0o644); err != nil {
		return "", err
	}
	if _, err := kubectlErr("apply", "--server-side", "-k", filepath.Join(dir, "manifests")); err != nil {
		return "", err
	}
	_, err = kubectlErr("wait", "--for=condition=Available", "--timeout=120s", "-n", operatorNS, "deployment/webapp-operator")
	return dir, err
}

// prepareUpgrade creates the WebApps in v1 under the old operator, waits until they are Ready, records their
// children and starts watching their Ready condition.
func prepareUpgrade(oldDir string) (*upgradeState, error) {
	u := &upgradeState{before: map[string]childState{}, v1Spec: map[string]string{}, oldDir: oldDir, stop: make(chan struct{}), done: make(chan struct{})}
	if err := restrictedNamespace(upgradeNS); err != nil {
		return nil, err
	}
	for i, name := range upgradeApps {
		app := fmt.Sprintf(`apiVersion: example.com/v1
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  replicas: %d
  port: 8080
  healthCheckPath: /healthz
  env: [{name: GREETING, value: "hello %d"}]
`, name, upgradeNS, cluster.WebserverImage, 2-i, i)
		if _, err := kubectlIn(app, "apply", "--server-side", "-f", "-"); err != nil {
			return nil, err
		}
	}
	for _, name := range upgradeApps {
		if _, err := kubectlErr("wait", "--for=condition=Ready", "--timeout=120s", "-n", upgradeNS, "webapp/"+name); err != nil {
			return nil, err
		}
		s, err := readChildState(name)
		if err != nil {
			return nil, err
		}
		u.before[name] = s
		if u.v1Spec[name], err = kubectlErr("get", "-n", upgradeNS, "webapps.v1.example.com/"+name, "-o", "jsonpath={.spec}"); err != nil {
			return nil, err
		}
	}
	u.started = time.Now()
	go u.watch()
	return u, nil
}

// readChildState reads what must not change for name.
func readChildState(name string) (childState, error) {
	pods, err := kubectlErr("get", "pods", "-n", upgradeNS, "-l", "app.kubernetes.io/instance="+name, "-o",
		`jsonpath={range .items[*]}{.metadata.uid}:{.status.containerStatuses[0].restartCount} {end}`)
	if err != nil {
		return childState{}, err
	}
	gen, err := kubectlErr("get", "-n", upgradeNS, "deployment/"+name, "-o", "jsonpath={.metadata.generation}")
	if err != nil {
		return childState{}, err
	}
	var writes []string
	for _, kind := range []string{"deployment", "service"} {
		w, err := kubectlErr("get", "-n", upgradeNS, kind+"/"+name, "--show-managed-fields", "-o",
			`jsonpath={.metadata.managedFields[?(@.manager=="webapp-operator")].time}`)
		if err != nil {
			return childState{}, err
		}
		writes = append(writes, kind+"@"+w)
	}
	return childState{pods: pods, generation: gen, ourWrites: strings.Join(writes, " ")}, nil
}

// finish waits until every WebApp is stored at v2 (the upgrade's last step) and stops the watcher.
func (u *upgradeState) finish() error {
	defer func() {
		close(u.stop)
		<-u.done
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, err := kubectlErr("get", "crd/webapps.example.com", "-o", "jsonpath={.status.storedVersions}")
		if err == nil && out == `["v2"]` {
			u.mu.Lock()
			u.took = time.Since(u.started)
			u.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("storedVersions is %s 5 minutes after the upgrade (%w)", out, err)
		}
		time.Sleep(time.Second)
	}
}

// watch reads the WebApps' Ready condition every 250 ms (in the version kubectl prefers, as a user would) until
// stopped, counting reads that failed and any that showed Ready other than True.
func (u *upgradeState) watch() {
	defer close(u.done)
	for {
		select {
		case <-u.stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		out, err := kubectlErr("get", "webapps", "-n", upgradeNS, "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		u.mu.Lock()
		u.reads++
		now := time.Now()
		if err != nil {
			u.errors++
			if u.firstErr == "" {
				u.firstErr, u.errFrom = err.Error(), now
			}
			u.errTo = now
		} else {
			for _, f := range strings.Fields(out) {
				if !strings.HasSuffix(f, "=True") {
					u.notReady = append(u.notReady, now.Format(time.RFC3339Nano)+" "+f)
				}
			}
		}
		u.mu.Unlock()
	}
}

// TestUpgradeFromBeforeV2IsANonEvent: after `make deploy` of this operator over the one before v2 (TestMain), every
// WebApp is stored at v2, no pod restarted or rolled, no child was written, each WebApp reads as it did in v1 and as
// the same in v2, and Ready stayed True in every read that answered.
func TestUpgradeFromBeforeV2IsANonEvent(t *testing.T) {
	if upgrade == nil {
		t.Fatal("TestMain did not prepare the upgrade")
	}
	jsonpathEquals(t, 10*time.Second, `["v2"]`, "{.status.storedVersions}", "crd/webapps.example.com")
	jsonpathEquals(t, 3*time.Minute, "2 2 webapp-operator:dev", "{.status.readyReplicas} {.status.updatedReplicas} {.spec.template.spec.containers[0].image}", "-n", operatorNS, "deployment/webapp-operator")
	upgrade.mu.Lock()
	failed := ""
	if upgrade.errors > 0 { // when reads failed, and the first one's words
		failed = fmt.Sprintf(" (from %s to %s, first: %s)", upgrade.errFrom.Format("15:04:05.000"), upgrade.errTo.Format("15:04:05.000"), upgrade.firstErr)
	}
	t.Logf("Ready watched through the upgrade (%v until every WebApp was stored at v2): %d reads, %d failed%s",
		upgrade.took.Round(100*time.Millisecond), upgrade.reads, upgrade.errors, failed)
	fmt.Printf("realnode: upgrade: stored at v2 after %v; %d reads of Ready, %d failed over %v\n", upgrade.took.Round(100*time.Millisecond),
		upgrade.reads, upgrade.errors, upgrade.errTo.Sub(upgrade.errFrom).Round(100*time.Millisecond))
	if len(upgrade.notReady) > 0 {
		t.Errorf("Ready was not True during the upgrade: %v", upgrade.notReady)
	}
	upgrade.mu.Unlock()

	for _, name := range upgradeApps {
		now, err := readChildState(name)
		if err != nil {
			t.Fatal(err)
		}
		if now != upgrade.before[name] {
			t.Errorf("%s changed through the upgrade:\n before %+v\n after  %+v", name, upgrade.before[name], now)
		}
		if v1 := jsonpath(t, "{.spec}", "-n", upgradeNS, "webapps.v1.example.com/"+name); v1 != upgrade.v1Spec[name] {
			t.Errorf("%s reads differently as v1:\n before %s\n after  %s", name, upgrade.v1Spec[name], v1)
		}
		var v2 struct {
			Replicas int32 `json:"replicas"`
			Ports    []struct {
				Name string
				Port int32
			}
			Container struct {
				HealthCheckPath string `json:"healthCheckPath"`
			} `json:"container"`
		}
		if err := json.Unmarshal([]byte(jsonpath(t, "{.spec}", "-n", upgradeNS, "webapps.v2.example.com/"+name)), &v2); err != nil {
			t.Fatal(err)
		}
		if len(v2.Ports) != 1 || v2.Ports[0].Name != "http" || v2.Ports[0].Port != 8080 || v2.Container.HealthCheckPath != "/healthz" || v2.Replicas < 1 {
			t.Errorf("%s as v2: %+v", name, v2)
		}
	}
}

// TestZRollbackToBeforeV2 follows the rollback of docs/api.md: v1 back as the storage version (the operator migrates every
// WebApp back), the operator stopped, the CRD's conversion removed, then the old release's tree. The old operator then
// runs, the apps never noticed, and it reconciles a change. It runs last: the old operator stays.
func TestZRollbackToBeforeV2(t *testing.T) {
	if upgrade == nil {
		t.Fatal("TestMain did not prepare the upgrade")
	}
	before := map[string]childState{}
	for _, name := range upgradeApps {
		s, err := readChildState(name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = s
	}
	for _, step := range rollbackSteps(upgrade.oldDir) {
		t.Logf("$ %s", step)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", step)
		cmd.Env = kubectlEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
	jsonpathEquals(t, 2*time.Minute, "1 "+cluster.BeforeV2Image, "{.status.readyReplicas} {.spec.template.spec.containers[0].image}", "-n", operatorNS, "deployment/webapp-operator")
	jsonpathEquals(t, 10*time.Second, `["v1"] v1`, "{.status.storedVersions} {.spec.versions[*].name}", "crd/webapps.example.com")
	for _, name := range upgradeApps {
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "-n", upgradeNS, "webapp/"+name)
		now, err := readChildState(name)
		if err != nil {
			t.Fatal(err)
		}
		if now.pods != before[name].pods || now.generation != before[name].generation {
			t.Errorf("%s's app changed through the rollback:\n before %+v\n after  %+v", name, before[name], now)
		}
		if v1 := jsonpath(t, "{.spec}", "-n", upgradeNS, "webapp/"+name); v1 != upgrade.v1Spec[name] {
			t.Errorf("%s reads differently after the rollback:\n before %s\n after  %s", name, upgrade.v1Spec[name], v1)
		}
	}
	// The old operator works: a change reaches the Deployment and the status.
	kubectl(t, "patch", "-n", upgradeNS, "webapp/keep-b", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	jsonpathEquals(t, 2*time.Minute, "2", "{.status.availableReplicas}", "-n", upgradeNS, "webapp/keep-b")
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "-n", upgradeNS, "webapp/keep-b")
}

// rollbackSteps are the rollback commands of docs/api.md, with the old release's tree in oldDir.
func rollbackSteps(oldDir string) []string {
	k := "kubectl"
	root := cluster.RepoRoot()
	return []string{
		k + " apply --server-side --force-conflicts -k " + filepath.Join(root, "manifests", "crd-rollback"),
		`until [ "$(` + k + ` get crd webapps.example.com -o jsonpath='{.status.storedVersions}')" = '["v1"]' ]; do sleep 2; done`,
		k + " -n webapp-system scale deployment/webapp-operator --replicas=0",
		k + " -n webapp-system wait --for=delete pod -l app.kubernetes.io/name=webapp-operator --timeout=2m",
		k + ` patch crd webapps.example.com --type=json -p '[{"op":"remove","path":"/spec/conversion/webhook"},{"op":"replace","path":"/spec/conversion/strategy","value":"None"}]'`,
		k + " apply --server-side --force-conflicts -k " + filepath.Join(oldDir, "manifests"),
		`rm -rf "${KUBECACHEDIR:-$HOME/.kube/cache}/discovery"`,
		k + " -n webapp-system delete service/webapp-operator-webhook secret/webapp-operator-webhook-cert pdb/webapp-operator role/webapp-operator-webhook-cert rolebinding/webapp-operator-webhook-cert",
	}
}
