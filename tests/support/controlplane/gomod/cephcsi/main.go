// Command cephcsi is the test cluster's CephFS CSI node plugin: a stand-in for ceph-csi's CephFS
// node service, which cannot be built here (the Go module proxy refuses github.com/ceph/ceph-csi
// and kubernetes-csi/node-driver-registrar, and no image can be pulled).
//
// It honours the part of ceph-csi's contract that a node sees, so that the PersistentVolumes of
// the admin guide's ceph-csi recipe mount exactly as written there:
//
//   - driver name cephfs.csi.ceph.com; the Identity and Node services of the CSI spec (the pinned
//     github.com/container-storage-interface/spec module) on a Unix socket;
//   - registration with the kubelet through its plugin-registration directory, as
//     node-driver-registrar does (GetInfo answers CSIPlugin, the driver name, the endpoint);
//   - NodeStageVolume of a static volume: volume_context clusterID, fsName, staticVolume "true",
//     rootPath, mounter, fuseMountOptions; secrets userID and userKey from the PV's
//     nodeStageSecretRef; the monitors looked up by clusterID in ceph-csi's config.json (the
//     ceph-csi-config ConfigMap's file); mounted with ceph-fuse (mounter "fuse") the way
//     ceph-csi's fuse mounter runs it, and with the kernel client otherwise, which fails where
//     the kernel has none, as ceph-csi's does;
//   - NodePublishVolume: a bind mount of the staging path at the pod's target (read-only when
//     asked); NodeUnpublishVolume and NodeUnstageVolume unmount and leave no mount behind;
//   - NodeGetCapabilities: STAGE_UNSTAGE_VOLUME and GET_VOLUME_STATS; NodeGetVolumeStats.
//
// Dynamic volumes (a controller creating subvolumes) are out of its scope: a volume without
// staticVolume "true" is refused with a message saying so.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	driverName    = "cephfs.csi.ceph.com"
	vendorVersion = "paddle-nbext-test-standin"
)

var options struct {
	endpoint        string
	registrationDir string
	nodeID          string
	clusterConfig   string
	cephConf        string
	stateDir        string
}

// clusterInfo is one entry of ceph-csi's config.json.
type clusterInfo struct {
	ClusterID string   `json:"clusterID"`
	Monitors  []string `json:"monitors"`
}

type plugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registration.UnimplementedRegistrationServer
	// One operation per volume at a time, as ceph-csi's volume locks do.
	locks sync.Map
}

func main() {
	flag.StringVar(&options.endpoint, "endpoint", "", "the CSI socket path")
	flag.StringVar(&options.registrationDir, "registration-dir", "", "the kubelet's plugins_registry directory")
	flag.StringVar(&options.nodeID, "nodeid", "", "this node's name")
	flag.StringVar(&options.clusterConfig, "cluster-config", "", "ceph-csi's config.json (clusterID -> monitors)")
	flag.StringVar(&options.cephConf, "ceph-conf", "", "the ceph.conf given to every mount (ceph-csi's ceph-config ConfigMap)")
	flag.StringVar(&options.stateDir, "state-dir", "", "where the plugin keeps per-volume key files")
	flag.Parse()
	for name, value := range map[string]string{"endpoint": options.endpoint, "registration-dir": options.registrationDir, "nodeid": options.nodeID, "cluster-config": options.clusterConfig, "state-dir": options.stateDir} {
		if value == "" {
			log.Fatalf("--%s is required", name)
		}
	}
	if err := os.MkdirAll(options.stateDir, 0o700); err != nil {
		log.Fatal(err)
	}
	p := &plugin{}

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(csiServer, p)
	csi.RegisterNodeServer(csiServer, p)
	csiListener := listen(options.endpoint)
	go serve(csiServer, csiListener)

	regServer := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	registration.RegisterRegistrationServer(regServer, p)
	regListener := listen(filepath.Join(options.registrationDir, driverName+"-reg.sock"))
	go serve(regServer, regListener)
	log.Printf("%s node plugin serving %s for node %s", driverName, options.endpoint, options.nodeID)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	regServer.Stop()
	csiServer.Stop()
	_ = os.Remove(options.endpoint)
	_ = os.Remove(filepath.Join(options.registrationDir, driverName+"-reg.sock"))
}

func listen(path string) net.Listener {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listen on %s: %v", path, err)
	}
	return listener
}

func serve(server *grpc.Server, listener net.Listener) {
	if err := server.Serve(listener); err != nil {
		log.Printf("serving %s: %v", listener.Addr(), err)
	}
}

// logCalls writes one line per call and its outcome (never the secrets a request carries).
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	started := time.Now()
	resp, err := handler(ctx, req)
	volume := ""
	if v, ok := req.(interface{ GetVolumeId() string }); ok {
		volume = " volume " + v.GetVolumeId()
	}
	if err != nil {
		log.Printf("%s%s: error after %s: %v", info.FullMethod, volume, time.Since(started).Round(time.Millisecond), err)
	} else {
		log.Printf("%s%s: ok in %s", info.FullMethod, volume, time.Since(started).Round(time.Millisecond))
	}
	return resp, err
}

// --- registration (what node-driver-registrar answers) ----------------------------------------

func (p *plugin) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: driverName, Endpoint: options.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (p *plugin) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.GetPluginRegistered() {
		log.Printf("the kubelet refused the registration: %s", s.GetError())
	} else {
		log.Printf("registered with the kubelet")
	}
	return &registration.RegistrationStatusResponse{}, nil
}

// --- identity ---------------------------------------------------------------------------------

func (p *plugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driverName, VendorVersion: vendorVersion}, nil
}

func (p *plugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *plugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// --- node -------------------------------------------------------------------------------------

func (p *plugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: options.nodeID}, nil
}

func (p *plugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	capability := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		capability(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		capability(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	}}, nil
}

func (p *plugin) lock(volumeID string) (func(), error) {
	m, _ := p.locks.LoadOrStore(volumeID, &sync.Mutex{})
	mutex := m.(*sync.Mutex)
	if !mutex.TryLock() {
		return nil, status.Errorf(codes.Aborted, "an operation with the given Volume ID %s already exists", volumeID)
	}
	return mutex.Unlock, nil
}

var safeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func (p *plugin) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	volumeID, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if volumeID == "" || staging == "" || req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, staging target path and volume capability are required")
	}
	unlock, err := p.lock(volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	attributes, secrets := req.GetVolumeContext(), req.GetSecrets()
	if attributes["staticVolume"] != "true" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s is not a static volume (staticVolume: \"true\"): this node plugin mounts only static CephFS volumes", volumeID)
	}
	rootPath := attributes["rootPath"]
	if rootPath == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required field rootPath")
	}
	clusterID := attributes["clusterID"]
	if clusterID == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required field clusterID")
	}
	userID, userKey := secrets["userID"], secrets["userKey"]
	if userID == "" {
		return nil, status.Error(codes.InvalidArgument, "missing ID field 'userID' in secrets")
	}
	if userKey == "" {
		return nil, status.Error(codes.InvalidArgument, "missing key field 'userKey' in secrets")
	}
	monitors, err := monitorsOf(clusterID)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted(staging) {
		log.Printf("volume %s is already staged at %s", volumeID, staging)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	keyFile := filepath.Join(options.stateDir, safeName.ReplaceAllString(volumeID, "_")+".key")
	if err := os.WriteFile(keyFile, []byte(userKey), 0o600); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	defer os.Remove(keyFile) // the mount keeps its own copy; nothing of the key stays on disk
	switch mounter := attributes["mounter"]; mounter {
	case "fuse":
		err = fuseMount(ctx, staging, monitors, userID, keyFile, rootPath, attributes["fsName"], attributes["fuseMountOptions"])
	case "", "kernel":
		err = kernelMount(ctx, staging, monitors, userID, keyFile, rootPath, attributes["fsName"], attributes["kernelMountOptions"])
	default:
		err = fmt.Errorf("unknown mounter %q (fuse or kernel)", mounter)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to mount volume %s: %v", volumeID, err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func monitorsOf(clusterID string) (string, error) {
	data, err := os.ReadFile(options.clusterConfig)
	if err != nil {
		return "", fmt.Errorf("error fetching configuration for cluster ID %q: %w", clusterID, err)
	}
	var clusters []clusterInfo
	if err := json.Unmarshal(data, &clusters); err != nil {
		return "", fmt.Errorf("unmarshal failed (%w), raw buffer response: %s", err, data)
	}
	for _, cluster := range clusters {
		if cluster.ClusterID == clusterID {
			if len(cluster.Monitors) == 0 {
				return "", fmt.Errorf("empty monitor list for cluster ID (%s) in config", clusterID)
			}
			return strings.Join(cluster.Monitors, ","), nil
		}
	}
	return "", fmt.Errorf("missing configuration for cluster ID %q", clusterID)
}

// fuseMount runs ceph-fuse the way ceph-csi's fuse mounter does; ceph-fuse forks into the
// background once the mount is up, so its first process's exit says whether it worked.
func fuseMount(ctx context.Context, target, monitors, userID, keyFile, rootPath, fsName, mountOptions string) error {
	args := []string{target, "-m", monitors, "-n", "client." + userID, "--keyfile=" + keyFile, "-r", rootPath, "-o", "nonempty"}
	if options.cephConf != "" {
		args = append(args, "-c", options.cephConf)
	}
	if mountOptions != "" {
		args = append(args, "-o", mountOptions)
	}
	if fsName != "" {
		args = append(args, "--client_mds_namespace="+fsName)
	}
	command := exec.CommandContext(ctx, "ceph-fuse", args...)
	output, err := command.CombinedOutput()
	if err != nil {
		return fmt.Errorf("an error (%v) occurred while running ceph-fuse args: %v; output: %s", err, redact(args), lastLines(output))
	}
	if !mounted(target) {
		return fmt.Errorf("ceph-fuse exited without mounting %s; output: %s", target, lastLines(output))
	}
	return nil
}

func kernelMount(ctx context.Context, target, monitors, userID, keyFile, rootPath, fsName, mountOptions string) error {
	optionList := "name=" + userID + ",secretfile=" + keyFile
	if fsName != "" {
		optionList += ",mds_namespace=" + fsName
	}
	if mountOptions != "" {
		optionList += "," + mountOptions
	}
	output, err := exec.CommandContext(ctx, "mount", "-t", "ceph", monitors+":"+rootPath, target, "-o", optionList).CombinedOutput()
	if err != nil {
		return fmt.Errorf("an error (%v) occurred while running mount -t ceph: %s", err, lastLines(output))
	}
	return nil
}

func redact(args []string) []string {
	shown := make([]string, len(args))
	for i, arg := range args {
		if strings.HasPrefix(arg, "--keyfile=") {
			arg = "--keyfile=***stripped***"
		}
		shown[i] = arg
	}
	return shown
}

func lastLines(output []byte) string {
	lines := strings.Split(strings.TrimSpace(string(output)), "\n")
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	return strings.Join(lines, " | ")
}

func (p *plugin) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	volumeID, staging, target := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetTargetPath()
	if volumeID == "" || staging == "" || target == "" || req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, staging and target paths and volume capability are required")
	}
	unlock, err := p.lock(volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !mounted(staging) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", volumeID, staging)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if output, err := exec.CommandContext(ctx, "mount", "--bind", staging, target).CombinedOutput(); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount of %s failed: %v: %s", volumeID, err, lastLines(output))
	}
	if req.GetReadonly() {
		if output, err := exec.CommandContext(ctx, "mount", "-o", "remount,bind,ro", target).CombinedOutput(); err != nil {
			_ = unmount(target)
			return nil, status.Errorf(codes.Internal, "read-only remount of %s failed: %v: %s", volumeID, err, lastLines(output))
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (p *plugin) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	volumeID, target := req.GetVolumeId(), req.GetTargetPath()
	if volumeID == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and target path are required")
	}
	unlock, err := p.lock(volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := unmount(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (p *plugin) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	volumeID, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if volumeID == "" || staging == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and staging target path are required")
	}
	unlock, err := p.lock(volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := unmount(staging); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// unmount removes every mount stacked at path; a FUSE mount whose daemon died (ENOTCONN) is
// detached lazily, as it can no longer be unmounted cleanly.
func unmount(path string) error {
	for mounted(path) {
		output, err := exec.Command("umount", path).CombinedOutput()
		if err != nil {
			if lazy, lazyErr := exec.Command("umount", "-l", path).CombinedOutput(); lazyErr != nil {
				return fmt.Errorf("umount %s failed: %s; umount -l: %s", path, lastLines(output), lastLines(lazy))
			}
		}
	}
	return nil
}

func (p *plugin) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	path := req.GetVolumePath()
	if req.GetVolumeId() == "" || path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and volume path are required")
	}
	if !mounted(path) {
		return nil, status.Errorf(codes.NotFound, "%s is not mounted", path)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", path, err)
	}
	size := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * size, Available: int64(fs.Bavail) * size, Used: int64(fs.Blocks-fs.Bfree) * size},
			{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
		},
	}, nil
}

// mounted says whether path is a mount point (in this process's mount namespace: the host's,
// which the kubelet and the container runtime share).
func mounted(path string) bool {
	clean := filepath.Clean(path)
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<16), 1<<20)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) > 4 && unescape(fields[4]) == clean {
			return true
		}
	}
	return false
}

var octal = regexp.MustCompile(`\\[0-7]{3}`)

func unescape(field string) string {
	return octal.ReplaceAllStringFunc(field, func(code string) string {
		value, _ := strconv.ParseUint(code[1:], 8, 8)
		return string(rune(value))
	})
}
