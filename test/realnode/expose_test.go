package realnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

const traefikNS = "traefik-system"

// traefikManifests run Traefik (built here from its module) as the Gateway API implementation of GatewayClass
// traefik and the Ingress controller of IngressClass traefik, with a Gateway "public" listening on 8000 (HTTP) and
// 8443 (HTTPS: TLS on every router there, as Traefik's own chart sets it; an Ingress's spec.tls gives the
// certificates), for routes of every namespace; it publishes its Service's ClusterIP (fixed: 10.0.0.10, in the band of the
// Service range the API server keeps for fixed addresses, so no Service made before it can hold it) as the
// Ingresses' address. It sends nothing out (no version check, no usage statistics).
const traefikManifests = `apiVersion: v1
kind: Namespace
metadata: {name: traefik-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: traefik-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: webapp-test-traefik}
rules:
- apiGroups: [""]
  resources: [namespaces, nodes, services, secrets, configmaps]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses, gateways, httproutes, grpcroutes, referencegrants, backendtlspolicies]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses/status, gateways/status, httproutes/status, grpcroutes/status, backendtlspolicies/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: webapp-test-traefik}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: webapp-test-traefik}
subjects: [{kind: ServiceAccount, name: traefik, namespace: traefik-system}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: traefik, namespace: traefik-system}
spec:
  selector: {matchLabels: {app: traefik}}
  template:
    metadata: {labels: {app: traefik}}
    spec:
      serviceAccountName: traefik
      containers:
      - name: traefik
        image: ` + cluster.TraefikImage + `
        args:
        - --global.checknewversion=false
        - --global.sendanonymoususage=false
        - --entrypoints.web.address=:8000
        - --entrypoints.websecure.address=:8443
        - --entrypoints.websecure.http.tls=true
        - --ping=true
        - --providers.kubernetesgateway=true
        - --providers.kubernetesingress=true
        - --providers.kubernetesingress.ingressendpoint.ip=10.0.0.10
        - --metrics.prometheus=true
        ports:
        - {name: web, containerPort: 8000}
        - {name: websecure, containerPort: 8443}
        readinessProbe: {httpGet: {path: /ping, port: 8080}, periodSeconds: 2}
        securityContext:
          runAsNonRoot: true
          readOnlyRootFilesystem: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata: {name: traefik, namespace: traefik-system}
spec:
  clusterIP: 10.0.0.10
  selector: {app: traefik}
  ports:
  - {name: web, port: 80, targetPort: web}
  - {name: websecure, port: 443, targetPort: websecure}
  - {name: admin, port: 8080, targetPort: 8080}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: traefik}
spec: {controller: traefik.io/ingress-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: traefik}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: traefik-system}
spec:
  gatewayClassName: traefik
  listeners:
  - name: http
    protocol: HTTP
    port: 8000
    allowedRoutes: {namespaces: {from: All}}
`

// startGateway installs the Gateway API and Traefik, waits until Traefik has programmed the Gateway public, and
// returns Traefik's URL.
func startGateway(t *testing.T) string {
	t.Helper()
	installGatewayAPI(t)
	apply(t, traefikManifests)
	kubectl(t, "rollout", "status", "-n", traefikNS, "deployment/traefik", "--timeout=120s")
	jsonpathEquals(t, time.Minute, "True", `{.status.conditions[?(@.type=="Programmed")].status}`, "-n", traefikNS, "gateway/public")
	return "http://" + jsonpath(t, "{.spec.clusterIP}", "-n", traefikNS, "service/traefik") + "/"
}

// installGatewayAPI applies the Gateway API's standard CRDs from the module go.mod pins (read from the module
// cache: the node's namespace reaches no proxy).
func installGatewayAPI(t *testing.T) {
	t.Helper()
	module, err := cluster.ModuleDir(cluster.RepoRoot(), "sigs.k8s.io/gateway-api")
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(module, "config", "crd", "standard"))
	testutil.WaitEstablished(t, kubectlErr, "crd/httproutes.gateway.networking.k8s.io", "crd/gateways.gateway.networking.k8s.io")
}

// TestExposedThroughARealGatewayAndIngressController: Traefik serves a Gateway and an IngressClass; two WebApps on
// one host with different path prefixes are reached through the Gateway, each by its own pods; a third, through an
// Ingress with TLS from its Secret, answers HTTPS whose certificate the client verifies against its CA; each WebApp
// says Exposed with the URL; removing expose stops the traffic. Every request is sent inside the node's namespace.
func TestExposedThroughARealGatewayAndIngressController(t *testing.T) {
	ensureAppNamespace(t)
	start := time.Now()
	startGateway(t)
	fmt.Printf("realnode: Traefik programmed the Gateway %.0fs after the CRDs' apply\n", time.Since(start).Seconds())

	// The certificate of the Ingress's host, signed by a CA of this test's own.
	ca, caKey := newCA(t)
	certPEM, keyPEM := serverCert(t, ca, caKey, "secure.shop.test")
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: secure-tls, namespace: %s}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
`, appNS, base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)))

	exposed := func(name, expose string) string {
		return fmt.Sprintf(`apiVersion: example.com/v2
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  ports: [{name: http, port: 8080}]
  container: {healthCheckPath: /healthz}
  pod: {security: Restricted}
  expose: %s
`, name, appNS, cluster.WebserverImage, expose)
	}
	apply(t, exposed("front", `{hosts: [www.shop.test], paths: [/front], gateway: {name: public, namespace: traefik-system}}`))
	apply(t, exposed("blog", `{hosts: [www.shop.test], paths: [/blog], gateway: {name: public, namespace: traefik-system, sectionName: http}}`))
	apply(t, exposed("secure", `{hosts: [secure.shop.test], ingress: {className: traefik}, tls: {secretName: secure-tls}}`))
	for _, name := range []string{"front", "blog", "secure"} {
		defer kubectl(t, "delete", "-n", appNS, "webapp/"+name, "--wait=false")
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/"+name)
	}
	for name, url := range map[string]string{"front": "http://www.shop.test/front", "blog": "http://www.shop.test/blog", "secure": "https://secure.shop.test/"} {
		jsonpathEquals(t, time.Minute, "True "+url, `{.status.conditions[?(@.type=="Exposed")].status} {.status.url}`, "-n", appNS, "webapp/"+name)
	}
	fmt.Printf("realnode: expose: the three WebApps Exposed %.0fs after Traefik was ready\n", time.Since(start).Seconds())
	fmt.Printf("realnode: expose: %s\n", jsonpath(t, `{.status.conditions[?(@.type=="Exposed")].message}`, "-n", appNS, "webapp/secure"))

	traefikIP := jsonpath(t, "{.spec.clusterIP}", "-n", traefikNS, "service/traefik")
	// Each path prefix reaches its own WebApp's pods, by the host the request names.
	for _, name := range []string{"front", "blog"} {
		pods := podNames(t, name)
		eventually(t, time.Minute, name+" answers through the Gateway", func() error {
			return answeredByOneOf("http://"+traefikIP+"/"+name, "www.shop.test", nil, pods)
		})
	}
	// Another host is not routed.
	if code, _, err := getWithHost("http://"+traefikIP+"/front", "other.shop.test", nil); err != nil || code != http.StatusNotFound {
		t.Errorf("another host: %d, %v; want 404", code, err)
	}
	// HTTPS through the Ingress: the client checks the certificate against the test's CA, for the host.
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	pods := podNames(t, "secure")
	eventually(t, time.Minute, "secure answers over verified HTTPS through the Ingress", func() error {
		return answeredByOneOf("https://"+traefikIP+"/", "secure.shop.test", roots, pods)
	})

	// expose removed: the route goes, and the traffic stops.
	kubectl(t, "patch", "-n", appNS, "webapp/blog", "--type=json", "-p", `[{"op": "remove", "path": "/spec/expose"}]`)
	eventually(t, time.Minute, "blog no longer routed", func() error {
		code, _, err := getWithHost("http://"+traefikIP+"/blog", "www.shop.test", nil)
		if err == nil && code != http.StatusNotFound {
			err = fmt.Errorf("GET /blog: %d", code)
		}
		return err
	})
	if code, _, err := getWithHost("http://"+traefikIP+"/front", "www.shop.test", nil); err != nil || code != http.StatusOK {
		t.Errorf("front after blog's route went: %d, %v", code, err)
	}
	if out, err := kubectlErr("get", "-n", appNS, "httproute/blog"); err == nil {
		t.Errorf("blog's HTTPRoute is still there: %s", out)
	}
}

// getWithHost sends one GET to url (an address inside the node's namespace) naming host, over TLS verified against
// roots for host when url is https.
func getWithHost(url, host string, roots *x509.CertPool) (int, string, error) {
	return request(url, host, "", &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12})
}

// answeredByOneOf: a GET of url naming host is answered 200 by one of the pods.
func answeredByOneOf(url, host string, roots *x509.CertPool, pods []string) error {
	code, body, err := getWithHost(url, host, roots)
	if err != nil {
		return err
	}
	var r reply
	if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || !slices.Contains(pods, r.Hostname) {
		return fmt.Errorf("%d %q, want an answer of one of %v", code, body, pods)
	}
	return nil
}

// newCA is a CA certificate and key for one test.
func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webapp-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// serverCert is a serving certificate for host signed by ca, and its key, in PEM.
func serverCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, host string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
