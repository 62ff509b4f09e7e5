package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

// TestAutoscalingScalesUpUnderLoadAndBackDown: metrics-server (built from its module, deployed with its own
// manifests and their test-cluster TLS component) serves the kubelet's resource metrics; CPU load through the
// WebApp's Service makes its HPA scale it to maxReplicas, and the end of the load brings it back to minReplicas
// (the scale-down wait shortened through spec.autoscaling.behavior). The status says who decides the count, and
// the operator writes no Deployment spec while the HPA scales.
func TestAutoscalingScalesUpUnderLoadAndBackDown(t *testing.T) {
	ensureAppNamespace(t)
	deployMetricsServer(t)
	const name = "busy"
	apply(t, fmt.Sprintf(`apiVersion: example.com/v2
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  ports: [{name: http, port: 8080}]
  container:
    healthCheckPath: /healthz
    # A small request and a limit: one pod's load is many times its request, and the node keeps its other cores.
    resources: {requests: {cpu: 20m}, limits: {cpu: 100m}}
  pod: {security: Restricted}
  autoscaling:
    minReplicas: 1
    maxReplicas: 3
    targetCPUUtilizationPercentage: 50
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 0
        policies: [{type: Percent, value: 100, periodSeconds: 15}]
`, name, appNS, cluster.WebserverImage))
	defer kubectl(t, "delete", "-n", appNS, "webapp/"+name, "--wait=false")
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/"+name)
	jsonpathEquals(t, 30*time.Second, "HorizontalPodAutoscaler 1", "{.status.replicasSetBy} {.status.desiredReplicas}", "-n", appNS, "webapp/"+name)
	// The HPA acts only once it can read the pod's CPU use: metrics-server needs two of the kubelet's samples.
	eventually(t, 2*time.Minute, "the HPA reads the pods' CPU use", func() error {
		got, err := kubectlErr("get", "-n", appNS, "hpa/"+name, "-o", "jsonpath={.status.currentMetrics[0].resource.current.averageUtilization}")
		if err == nil && got == "" {
			err = fmt.Errorf("no current CPU utilisation yet (%s)", jsonpath(t, `{.status.conditions[?(@.type=="ScalingActive")].message}`, "-n", appNS, "hpa/"+name))
		}
		return err
	})
	depWrites := ourDeploymentWrite(t, name)

	// Load: four clients at a time, each request burning 200 ms of CPU in a pod, through the ClusterIP (inside the
	// node's namespace, like everything in this package).
	url := serviceURL(t, name) + "burn?ms=200"
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if code, _, err := get(url, ""); err != nil || code != 200 {
					failed.Add(1)
				}
				sent.Add(1)
			}
		})
	}
	loadStart := time.Now()
	defer func() { stop(); wg.Wait() }()
	eventually(t, 4*time.Minute, "3 ready pods under load", func() error {
		got, err := kubectlErr("get", "-n", appNS, "webapp/"+name, "-o", `jsonpath={.status.desiredReplicas} {.status.availableReplicas} {.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && got != "3 3 True" {
			err = fmt.Errorf("desired, available, Ready = %s", got)
		}
		return err
	})
	upTook := time.Since(loadStart)
	stop()
	wg.Wait()
	fmt.Printf("realnode: autoscaling: 1 -> 3 ready pods %.0fs after the load began (%d requests, %d failed)\n", upTook.Seconds(), sent.Load(), failed.Load())

	idle := time.Now()
	eventually(t, 4*time.Minute, "back to 1 pod after the load", func() error {
		got, err := kubectlErr("get", "-n", appNS, "webapp/"+name, "-o", `jsonpath={.status.desiredReplicas} {.status.replicas} {.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && got != "1 1 True" {
			err = fmt.Errorf("desired, replicas, Ready = %s", got)
		}
		return err
	})
	fmt.Printf("realnode: autoscaling: 3 -> 1 pod %.0fs after the load ended\n", time.Since(idle).Seconds())
	// The HPA wrote the counts through /scale; our apply of the Deployment was not sent again meanwhile.
	if now := ourDeploymentWrite(t, name); now != depWrites {
		t.Errorf("the operator wrote the Deployment while the HPA scaled: its entry went from %s to %s", depWrites, now)
	}
	if got := jsonpath(t, "{.status.replicasSetBy}", "-n", appNS, "webapp/"+name); got != "HorizontalPodAutoscaler" {
		t.Errorf("replicasSetBy = %q", got)
	}
}

// ourDeploymentWrite is the time and field set of the operator's Apply entry on a WebApp's Deployment (not its
// /scale subresource's), which any apply it sends with a change would renew.
func ourDeploymentWrite(t *testing.T, name string) string {
	t.Helper()
	var main []string
	for _, e := range strings.Split(jsonpath(t, `{range .metadata.managedFields[?(@.manager=="webapp-operator")]}{.subresource}@{.time}/{.fieldsV1}{"\n"}{end}`, "-n", appNS, "deployment/"+name), "\n") {
		// The main entry's line starts with its empty subresource; the /scale entry of the handover loses the count
		// to the HPA's first write, which is no write of ours.
		if strings.HasPrefix(e, "@") {
			main = append(main, e)
		}
	}
	return strings.Join(main, "\n")
}

// deployMetricsServer applies metrics-server's own manifests (base and the test component: the kubelet's
// self-signed serving certificate accepted, as its documentation says for test clusters) with the image built
// here, from the module test/tools/metrics-server pins, and waits until the metrics API answers with the node's use.
func deployMetricsServer(t *testing.T) {
	t.Helper()
	// The module was downloaded for the image's build.
	module, err := cluster.ModuleDir(filepath.Join(cluster.RepoRoot(), "test", "tools", "metrics-server"), "sigs.k8s.io/metrics-server")
	if err != nil {
		t.Fatal(err)
	}
	// Kustomize reads bases below its own directory only: a copy of the module's manifests goes there.
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(module, "manifests"), filepath.Join(dir, "upstream")).CombinedOutput(); err != nil {
		t.Fatalf("copying metrics-server's manifests: %v\n%s", err, out)
	}
	kustomization := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [upstream/base]
components: [upstream/components/test]
images:
- name: gcr.io/k8s-staging-metrics-server/metrics-server
  newName: ` + strings.Split(cluster.MetricsServerImage, ":")[0] + `
  newTag: "` + strings.Split(cluster.MetricsServerImage, ":")[1] + `"
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubectl(t, "apply", "--server-side", "-k", dir)
	kubectl(t, "wait", "--for=condition=Available", "--timeout=180s", "apiservice/v1beta1.metrics.k8s.io")
	eventually(t, 2*time.Minute, "the metrics API has the node's use", func() error {
		got, err := kubectlErr("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/"+cluster.RealNodeName)
		if err == nil && !strings.Contains(got, `"cpu"`) {
			err = fmt.Errorf("node metrics: %s", got)
		}
		return err
	})
	fmt.Printf("realnode: metrics-server serves the metrics API %.0fs after its apply\n", time.Since(start).Seconds())
}
