// Package natscluster runs an in-process JetStream cluster of nats-server
// nodes on loopback, for tests and benchmarks: each node with its own store
// directory, client and route ports fixed at start so a node can be shut
// down and started again on the same address and store.
package natscluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	mu    sync.Mutex
	nodes []*server.Server
	opts  []*server.Options
}

// Start starts n nodes (n >= 1) storing under dir/node-<i> and waits until
// every node is ready and JetStream has a meta leader (at most timeout).
func Start(dir string, n int, timeout time.Duration) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("natscluster: need at least one node")
	}
	clientPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routePorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for _, p := range routePorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{nodes: make([]*server.Server, n), opts: make([]*server.Options, n)}
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("node-%d", i), Host: "127.0.0.1", Port: clientPorts[i],
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			NoSigs: true, NoLog: true,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "verdryx", Host: "127.0.0.1", Port: routePorts[i]}
			o.Routes = routes
		}
		c.opts[i] = o
	}
	for i := range n {
		if err := c.startNode(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.WaitReady(timeout); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natscluster: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) startNode(i int) error {
	o := *c.opts[i]
	s, err := server.NewServer(&o)
	if err != nil {
		return fmt.Errorf("natscluster: node %d: %w", i, err)
	}
	go s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("natscluster: node %d not ready", i)
	}
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
	return nil
}

// WaitReady waits until every running node sees a JetStream meta leader
// and the expected number of peers.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		c.mu.Lock()
		for _, s := range c.nodes {
			if s != nil && (!s.JetStreamEnabled() || len(c.nodes) > 1 && !hasLeader(s)) {
				ok = false
			}
		}
		c.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natscluster: no JetStream meta leader after %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasLeader(s *server.Server) bool {
	js, err := s.Jsz(&server.JSzOptions{})
	if err != nil || js.Meta == nil {
		return false
	}
	return js.Meta.Leader != ""
}

// URLs returns the client URLs of every node, comma-separated (the form
// nats.Connect takes for a cluster).
func (c *Cluster) URLs() string {
	var us []string
	for _, o := range c.opts {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(us, ",")
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.opts) }

// StopNode shuts node i down and waits for it (its store is kept).
func (c *Cluster) StopNode(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// RestartNode starts node i again on its address and store.
func (c *Cluster) RestartNode(i int) error { return c.startNode(i) }

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for i := range c.opts {
		c.StopNode(i)
	}
}
