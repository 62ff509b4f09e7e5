// Command webserver is the real node's test web app: it listens after --listen-after (0: at once); it answers GET
// /healthz with 200, or 500 with --fail-healthz;
// GET /burn?ms=N by spinning on a CPU for N milliseconds (at most 10 s), the load of the autoscaling test; and a GET
// of any other path (a gateway's path prefix included) with who served the request (pod name, uid, the GREETING
// environment variable). With --files=DIR it serves GET /files/NAME from DIR and stores the body of PUT /files/NAME
// there (a mounted ConfigMap, a claim); with --scratch=DIR,... it writes a file into each directory before it
// listens, and exits if it cannot (as nginx does with its cache and pid: the test of writable paths on a read-only
// root).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// reply is the body of GET /: the tests read the serving pod, its user and its configuration from it.
type reply struct {
	Hostname string `json:"hostname"`
	UID      int    `json:"uid"`
	GID      int    `json:"gid"`
	Greeting string `json:"greeting"`
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	failHealthz := flag.Bool("fail-healthz", false, "answer /healthz with 500, so a readiness probe on it fails")
	failRoot := flag.Bool("fail-root", false, "answer GET / with 500 (and /healthz with 200): a version that runs ready and fails its users")
	listenAfter := flag.Duration("listen-after", 0, "wait this long before listening, as an app that starts slowly")
	files := flag.String("files", "", "serve GET /files/NAME from this directory, and store PUT /files/NAME in it")
	scratch := flag.String("scratch", "", "comma-separated directories to write a file into before listening (exit if one cannot be)")
	flag.Parse()
	for _, dir := range strings.Split(*scratch, ",") {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "webserver.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			log.Fatalf("cannot write into %s: %v", dir, err)
		}
	}
	host, _ := os.Hostname()
	me := reply{Hostname: host, UID: os.Getuid(), GID: os.Getgid(), Greeting: os.Getenv("GREETING")}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) {
		if *failRoot {
			http.Error(w, "failing: started with --fail-root", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(me)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if *failHealthz {
			http.Error(w, "unhealthy: started with --fail-healthz", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	// A canary judge's stand-in for a webhook check: it answers POST /judge?value=V with {"value": V} when told a
	// CheckRequest (the operator's call), 400 otherwise.
	mux.HandleFunc("POST /judge", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Kind           string `json:"kind"`
			CanaryRevision string `json:"canaryRevision"`
		}
		v, err := strconv.ParseFloat(r.URL.Query().Get("value"), 64)
		if json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req) != nil || req.Kind != "CheckRequest" || req.CanaryRevision == "" || err != nil {
			http.Error(w, "want a CheckRequest, and ?value=<number>", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"value": %s}`, strconv.FormatFloat(v, 'g', -1, 64))
	})
	mux.HandleFunc("GET /burn", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 || ms > 10000 {
			http.Error(w, "ms must be a number of milliseconds from 0 to 10000", http.StatusBadRequest)
			return
		}
		spins := 0
		for end := time.Now().Add(time.Duration(ms) * time.Millisecond); time.Now().Before(end); {
			spins++
		}
		_, _ = w.Write([]byte(strconv.Itoa(spins) + " spins\n"))
	})
	if *files != "" {
		mux.Handle("GET /files/", http.StripPrefix("/files/", http.FileServer(http.Dir(*files))))
		mux.HandleFunc("PUT /files/{name}", func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err == nil {
				err = os.WriteFile(filepath.Join(*files, filepath.Base(r.PathValue("name"))), body, 0o600)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	time.Sleep(*listenAfter)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("serving on %s as uid %d (fail-healthz=%v)", *listen, me.UID, *failHealthz)
	log.Fatal(srv.ListenAndServe())
}
