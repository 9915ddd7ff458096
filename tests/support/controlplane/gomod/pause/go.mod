// Builds the pause program of the real test node's sandbox image (no image can be pulled here).
module paddle-nbext.test/controlplane/pause

go 1.26.0
