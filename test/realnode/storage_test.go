package realnode

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

// deleteWebApps deletes the WebApps and waits until they are gone (a finalizer of ours must not outlive the test).
func deleteWebApps(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		kubectl(t, "delete", "-n", appNS, "webapp/"+n, "--ignore-not-found", "--wait=false")
	}
	for _, n := range names {
		kubectl(t, "wait", "--for=delete", "--timeout=120s", "-n", appNS, "webapp/"+n)
	}
}

// filesURL is the URL of a file the test web app serves (--files) through the WebApp's Service.
func filesURL(t *testing.T, app, file string) string {
	t.Helper()
	return serviceURL(t, app) + "files/" + file
}

// put stores body at url (the test web app's PUT /files/NAME).
func put(url, body string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, url, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("PUT %s: %d", url, resp.StatusCode)
	}
	return nil
}

// servesOnly: n GETs of url (new connections, so every pod is asked) all answer want.
func servesOnly(url, want string, n int) error {
	for range n {
		code, body, err := get(url, "")
		if err != nil {
			return err
		}
		if code != http.StatusOK || body != want {
			return fmt.Errorf("GET %s: %d %q, want %q", url, code, body, want)
		}
	}
	return nil
}

// TestAMountedConfigMapIsServedAndItsChangeRolled: a ConfigMap's file, mounted read-only into the app, is served; a
// change of the ConfigMap rolls the pods (its content is in the pod template's config hash), and only the new
// content is served after, by new pods.
func TestAMountedConfigMapIsServedAndItsChangeRolled(t *testing.T) {
	ensureAppNamespace(t)
	site := func(content string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site, namespace: %s}\ndata: {index.html: %q}\n", appNS, content)
	}
	apply(t, site("version one"))
	apply(t, webAppV2(appNS, "files", cluster.WebserverImage, 2, `  container:
    args: ["--files=/srv/site"]
    healthCheckPath: /healthz
    volumeMounts: [{name: site, mountPath: /srv/site, readOnly: true}]
  volumes: [{name: site, configMap: {name: site}}]
`))
	defer deleteWebApps(t, "files")
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/files")
	url := filesURL(t, "files", "index.html")
	eventually(t, 30*time.Second, "the ConfigMap's file served", func() error { return servesOnly(url, "version one", 6) })

	before := podNames(t, "files")
	start := time.Now()
	apply(t, site("version two"))
	eventually(t, 2*time.Minute, "the new content served by new pods only", func() error {
		now := podNames(t, "files")
		if len(now) != 2 || slices.ContainsFunc(now, func(p string) bool { return slices.Contains(before, p) }) {
			return fmt.Errorf("pods %v, before %v", now, before)
		}
		return servesOnly(url, "version two", 10)
	})
	fmt.Printf("realnode: storage: a ConfigMap's change rolled and served by new pods %.1fs after its apply\n", time.Since(start).Seconds())
}

// localStorage makes a StorageClass without a provisioner (volumes bound when a pod needs them) and a static local
// PersistentVolume of 1Gi in a directory of the node's, writable by the app's non-root user; it returns a function
// that removes the volume.
func localStorage(t *testing.T, pv string) func() {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, "pv-")
	if err != nil {
		t.Fatal(err)
	}
	// The app runs as a non-root user the directory does not belong to.
	if err := os.Chmod(dir, 0o777); err != nil { //nolint:gosec // the node's namespace is the test's own
		t.Fatal(err)
	}
	apply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-storage}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local-storage
  local: {path: %s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%s]}]
`, pv, dir, cluster.RealNodeName))
	return func() { kubectl(t, "delete", "pv/"+pv, "--ignore-not-found", "--wait=false") }
}

// TestAnOwnedClaimKeepsItsData: the WebApp's own claim binds a static local volume; data written to it survives a
// rollout (by Recreate: the claim is ReadWriteOnce), a restart of the operator, and the WebApp's deletion (the claim
// is kept by default, released); a WebApp of the same name takes the kept claim up again, with its data.
func TestAnOwnedClaimKeepsItsData(t *testing.T) {
	ensureAppNamespace(t)
	defer localStorage(t, "store-volume")()
	store := webAppV2(appNS, "store", cluster.WebserverImage, 0, `  container:
    args: ["--files=/data"]
    healthCheckPath: /healthz
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, claim: {size: 1Gi, storageClassName: local-storage}}]
`)
	apply(t, store)
	defer func() {
		deleteWebApps(t, "store")
		kubectl(t, "delete", "-n", appNS, "pvc/store", "--ignore-not-found", "--wait=false")
	}()
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/store")
	jsonpathEquals(t, 30*time.Second, "Bound store-volume", "{.status.phase} {.spec.volumeName}", "-n", appNS, "pvc/store")
	jsonpathEquals(t, 10*time.Second, "Recreate", "{.spec.strategy.type}", "-n", appNS, "deployment/store")
	url := filesURL(t, "store", "note")
	eventually(t, 30*time.Second, "a note written to the claim", func() error { return put(url, "written before") })

	// A rollout (a new pod template): the new pod reads what the old one wrote.
	before := podNames(t, "store")
	kubectl(t, "patch", "-n", appNS, "webapp/store", "--type=merge", "-p", `{"spec":{"container":{"env":[{"name":"GREETING","value":"rolled"}]}}}`)
	eventually(t, 2*time.Minute, "a new pod reads the note", func() error {
		if now := podNames(t, "store"); len(now) != 1 || slices.Contains(before, now[0]) {
			return fmt.Errorf("pods %v, before %v", now, before)
		}
		return servesOnly(url, "written before", 3)
	})

	// The operator restarted: nothing changes, the data is there.
	claimVersion := jsonpath(t, "{.metadata.resourceVersion}", "-n", appNS, "pvc/store")
	kubectl(t, "rollout", "restart", "-n", operatorNS, "deployment/webapp-operator")
	kubectl(t, "rollout", "status", "-n", operatorNS, "deployment/webapp-operator", "--timeout=120s")
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "-n", appNS, "webapp/store")
	if err := servesOnly(url, "written before", 3); err != nil {
		t.Error(err)
	}
	if now := jsonpath(t, "{.metadata.resourceVersion}", "-n", appNS, "pvc/store"); now != claimVersion {
		t.Errorf("the claim was written by the restarted operator (resourceVersion %s -> %s)", claimVersion, now)
	}

	// The WebApp deleted: the claim stays, bound, with no owner.
	deleteWebApps(t, "store")
	jsonpathEquals(t, 10*time.Second, "Bound ", "{.status.phase} {.metadata.ownerReferences}", "-n", appNS, "pvc/store")
	fmt.Printf("realnode: storage: the claim outlived its WebApp: %s\n", jsonpath(t, "{.metadata.name} {.status.phase} {.spec.volumeName}", "-n", appNS, "pvc/store"))

	// The same WebApp again: it takes the kept claim up, and the note is there.
	apply(t, store)
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/store")
	jsonpathEquals(t, 10*time.Second, "WebApp store", "{.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].name}", "-n", appNS, "pvc/store")
	// Its Service is a new one (the old went with the WebApp), at a new address.
	url = filesURL(t, "store", "note")
	eventually(t, 30*time.Second, "the note read back after the WebApp came back", func() error { return servesOnly(url, "written before", 3) })
}

// TestAReadOnlyRootWithWritablePaths: an app that writes its pid and cache at start (as nginx does) runs under the
// restricted profile with a read-only root filesystem, because the paths it writes are writable; without them it
// cannot start, and Ready says so.
func TestAReadOnlyRootWithWritablePaths(t *testing.T) {
	ensureAppNamespace(t)
	app := func(name, writable string) string {
		return webAppV2(appNS, name, cluster.WebserverImage, 1, `  container:
    args: ["--scratch=/tmp,/var/cache/app"]
    healthCheckPath: /healthz
    readOnlyRootFilesystem: true
`+writable)
	}
	apply(t, app("readonly", "    writablePaths: [/tmp, /var/cache/app]\n"))
	apply(t, app("readonly-nowhere", ""))
	defer deleteWebApps(t, "readonly", "readonly-nowhere")
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/readonly")
	pod := podNames(t, "readonly")[0]
	if got := jsonpath(t, "{.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.containers[0].volumeMounts[*].mountPath}", "-n", appNS, "pod/"+pod); !strings.HasPrefix(got, "true /tmp /var/cache/app") {
		t.Errorf("pod %s: read-only root and mounts = %q", pod, got)
	}
	jsonpathEquals(t, 2*time.Minute, "CrashLoopBackOff", `{.status.conditions[?(@.type=="Ready")].reason}`, "-n", appNS, "webapp/readonly-nowhere")
}

// load sends GETs naming host to url from 4 clients, each on a new connection (patientGet: an answer within 10 s is
// latency on two shared cores, not a failure), until stop is closed and at least least were sent; it returns how
// many were sent and how many failed (an error or a status other than 200).
func load(url, host string, least int64, stop <-chan struct{}) (sent, failed int64, firstFailure string) {
	var wg sync.WaitGroup
	var once sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					if atomic.LoadInt64(&sent) >= least {
						return
					}
				default:
				}
				code, body, _, err := patientGet(url, host)
				atomic.AddInt64(&sent, 1)
				if err != nil || code != http.StatusOK {
					atomic.AddInt64(&failed, 1)
					once.Do(func() { firstFailure = fmt.Sprintf("%d %q %v", code, body, err) })
				}
			}
		}()
	}
	wg.Wait()
	return sent, failed, firstFailure
}

// TestNoRequestFailsWhileRollingAndScalingDown: under continuous load through the Gateway, a 3-replica WebApp with
// a drain period rolls to a new image and scales down to one without a single failed request; the same without the
// drain period is printed, to show what it buys.
func TestNoRequestFailsWhileRollingAndScalingDown(t *testing.T) {
	ensureAppNamespace(t)
	traefik := startGateway(t)
	defer deleteWebApps(t, "steady")

	run := func(drain string) (int64, int64, string) {
		t.Helper()
		apply(t, webAppV2(appNS, "steady", cluster.WebserverImage, 3, `  container:
    healthCheckPath: /healthz
`+drain+`  expose: {hosts: [steady.shop.test], gateway: {name: public, namespace: traefik-system}}
`))
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/steady")
		jsonpathEquals(t, time.Minute, "True", `{.status.conditions[?(@.type=="Exposed")].status}`, "-n", appNS, "webapp/steady")
		eventually(t, time.Minute, "steady answers through the Gateway", func() error { return servesThrough(traefik, "steady.shop.test") })
		stop := make(chan struct{})
		var sent, failed int64
		var first string
		done := make(chan struct{})
		go func() { sent, failed, first = load(traefik, "steady.shop.test", 2000, stop); close(done) }()
		// A new image, then down to one pod; each waited for until the old pods are gone.
		kubectl(t, "patch", "-n", appNS, "webapp/steady", "--type=merge", "-p", `{"spec":{"image":"webapp-test/webserver:2"}}`)
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=180s", "-n", appNS, "webapp/steady")
		kubectl(t, "scale", "-n", appNS, "webapp/steady", "--replicas=1")
		eventually(t, 2*time.Minute, "one pod left", func() error {
			if pods := podNames(t, "steady"); len(pods) != 1 {
				return fmt.Errorf("pods %v", pods)
			}
			return nil
		})
		close(stop)
		<-done
		kubectl(t, "delete", "-n", appNS, "webapp/steady", "--wait=true", "--timeout=120s")
		eventually(t, 2*time.Minute, "no pod of steady left", func() error {
			if pods := podNames(t, "steady"); len(pods) != 0 {
				return fmt.Errorf("pods %v", pods)
			}
			return nil
		})
		return sent, failed, first
	}
	sent, failed, first := run("    drainSeconds: 10\n")
	fmt.Printf("realnode: storage: with a 10 s drain, %d of %d requests through the Gateway failed while 3 pods rolled to a new image and scaled down to 1\n", failed, sent)
	if failed != 0 || sent < 2000 {
		t.Errorf("with the drain period: %d of %d requests failed (want 0 of at least 2000); the first: %s", failed, sent, first)
	}
	sent, failed, first = run("")
	fmt.Printf("realnode: storage: without a drain, %d of %d requests failed the same way (first: %s)\n", failed, sent, first)
}

// servesThrough: a GET through the Gateway naming host is answered 200.
func servesThrough(url, host string) error {
	code, body, err := getWithHost(url, host, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%d %q", code, body)
	}
	return err
}

// TestMountTroubleIsReportedWithinSeconds: a missing ConfigMap the pods mount, and a claim that cannot bind (its
// storage class does not exist), are each in Ready's reason and message by name within seconds of the apply.
func TestMountTroubleIsReportedWithinSeconds(t *testing.T) {
	ensureAppNamespace(t)
	cases := []struct{ name, extra, want string }{
		{"nocfg", `  container:
    volumeMounts: [{name: config, mountPath: /etc/app}]
  volumes: [{name: config, configMap: {name: absent}}]
`, `configmap "absent" (volume "config") not found`},
		{"nobind", `  container:
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, claim: {size: 1Gi, storageClassName: no-such-class}}]
`, `claim "nobind" (volume "data") is not bound`},
	}
	for _, tc := range cases {
		start := time.Now()
		apply(t, webAppV2(appNS, tc.name, cluster.WebserverImage, 0, tc.extra))
		defer func() {
			deleteWebApps(t, tc.name)
			kubectl(t, "delete", "-n", appNS, "pvc/"+tc.name, "--ignore-not-found", "--wait=false")
		}()
		jsonpathEquals(t, time.Minute, "MountFailing", `{.status.conditions[?(@.type=="Ready")].reason}`, "-n", appNS, "webapp/"+tc.name)
		took := time.Since(start)
		msg := jsonpath(t, `{.status.conditions[?(@.type=="Ready")].message}`, "-n", appNS, "webapp/"+tc.name)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: Ready says %q, want it to say %q", tc.name, msg, tc.want)
		}
		fmt.Printf("realnode: storage: %s: Ready=False MountFailing %.1fs after the apply: %s\n", tc.name, took.Seconds(), msg)
	}
}
