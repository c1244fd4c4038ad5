//! Test vectors: pod templates and the `pod-template-hash` kube-controller-manager v1.36 computes.
//!
//! Produced by an oracle program running go-spew 1.1.1 (byte-identical to the
//! v1.1.2-0.20180830191138-d8f796af33cc Kubernetes vendors) with `dump.ForHash`'s configuration
//! over the Kubernetes v1.36 API types (the same declarations `layout.rs` is generated from,
//! JSON decoding of `resource.Quantity`, `intstr.IntOrString` and `metav1.Time` as
//! apimachinery does it, empty lists and maps nil as after protobuf decoding, `TZ` empty), then
//! FNV-32a, the collision count and `SafeEncodeString` as `controller.ComputeHash`. Fed the
//! v1.33 declarations instead, the same oracle reproduces every hash of the v1.33 corpus these
//! templates come from, and both full spew texts below, byte for byte.

/// One oracle result.
pub(super) struct Vector {
    /// What the template exercises.
    pub name: &'static str,
    /// The template as JSON.
    pub template: &'static str,
    /// `Deployment.status.collisionCount`.
    pub collision_count: Option<i32>,
    /// `controller.ComputeHash`.
    pub hash: &'static str,
}

/// The corpus.
pub(super) const VECTORS: &[Vector] = &[
    Vector {
        name: "nginx defaulted",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "6c5f67b5f7",
    },
    Vector {
        name: "nginx defaulted collision 0",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: Some(0),
        hash: "5c649576f",
    },
    Vector {
        name: "nginx defaulted collision 1",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: Some(1),
        hash: "6f4479b5f6",
    },
    Vector {
        name: "nginx defaulted collision 7",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: Some(7),
        hash: "7c547fb5fd",
    },
    Vector {
        name: "empty template",
        template: r#"{}"#,
        collision_count: None,
        hash: "85748b7f68",
    },
    Vector {
        name: "empty spec and metadata",
        template: r#"{"metadata":{},"spec":{"containers":[]}}"#,
        collision_count: None,
        hash: "85748b7f68",
    },
    Vector {
        name: "minimal container",
        template: r#"{"spec":{"containers":[{"name":"c"}]}}"#,
        collision_count: None,
        hash: "7565ff8789",
    },
    Vector {
        name: "upstream hash_test cats template",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.0.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: None,
        hash: "5ddb68d974",
    },
    Vector {
        name: "quantity 100m",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"100m"},"requests":{"memory":"100m","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "65bc645d55",
    },
    Vector {
        name: "quantity 0.5",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"0.5"},"requests":{"memory":"0.5","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "687585c5d7",
    },
    Vector {
        name: "quantity 1Gi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1Gi"},"requests":{"memory":"1Gi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "77fb867747",
    },
    Vector {
        name: "quantity 1.5Gi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1.5Gi"},"requests":{"memory":"1.5Gi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "79f4fb6b95",
    },
    Vector {
        name: "quantity 128974848",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"128974848"},"requests":{"memory":"128974848","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "85d9bf7bd7",
    },
    Vector {
        name: "quantity 129e6",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"129e6"},"requests":{"memory":"129e6","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "5c69bf64f5",
    },
    Vector {
        name: "quantity 123Mi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"123Mi"},"requests":{"memory":"123Mi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "649fcdf58f",
    },
    Vector {
        name: "quantity 1536Mi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1536Mi"},"requests":{"memory":"1536Mi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "77894f89b9",
    },
    Vector {
        name: "quantity 500m",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"500m"},"requests":{"memory":"500m","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "7d7bb46c8c",
    },
    Vector {
        name: "quantity 1000m",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1000m"},"requests":{"memory":"1000m","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "66fb78544f",
    },
    Vector {
        name: "quantity 2",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"2"},"requests":{"memory":"2","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "6cfcd768bc",
    },
    Vector {
        name: "quantity 64Ki",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"64Ki"},"requests":{"memory":"64Ki","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "59875456c9",
    },
    Vector {
        name: "quantity 1e3",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1e3"},"requests":{"memory":"1e3","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "55f9b48599",
    },
    Vector {
        name: "quantity 1.5",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1.5"},"requests":{"memory":"1.5","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "66dc5b6b5f",
    },
    Vector {
        name: "quantity 0.1m",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"0.1m"},"requests":{"memory":"0.1m","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "65d6597767",
    },
    Vector {
        name: "quantity 10Gi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"10Gi"},"requests":{"memory":"10Gi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "76bfd8fc4c",
    },
    Vector {
        name: "quantity 1234567890123456789",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1234567890123456789"},"requests":{"memory":"1234567890123456789","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "6d7596986c",
    },
    Vector {
        name: "quantity 100Ei",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"100Ei"},"requests":{"memory":"100Ei","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "6766bf74b7",
    },
    Vector {
        name: "quantity 0.0000000001",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"0.0000000001"},"requests":{"memory":"0.0000000001","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "569f87b89f",
    },
    Vector {
        name: "quantity 0.0000000000",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"0.0000000000"},"requests":{"memory":"0.0000000000","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "57b8cdc995",
    },
    Vector {
        name: "quantity -1.5Ki",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"-1.5Ki"},"requests":{"memory":"-1.5Ki","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "65766dc5b9",
    },
    Vector {
        name: "quantity +5",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"+5"},"requests":{"memory":"+5","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "7ccd55d9cc",
    },
    Vector {
        name: "quantity 007",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"007"},"requests":{"memory":"007","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "7b4456b647",
    },
    Vector {
        name: "quantity 1.",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1."},"requests":{"memory":"1.","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "bf95fd5cf",
    },
    Vector {
        name: "quantity .5",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":".5"},"requests":{"memory":".5","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "687585c5d7",
    },
    Vector {
        name: "quantity 5E",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"5E"},"requests":{"memory":"5E","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "67cbb5dc75",
    },
    Vector {
        name: "quantity 2e-3",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"2e-3"},"requests":{"memory":"2e-3","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "64744cf8bc",
    },
    Vector {
        name: "quantity 1Ti",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1Ti"},"requests":{"memory":"1Ti","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "579cd58845",
    },
    Vector {
        name: "quantity 3Pi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"3Pi"},"requests":{"memory":"3Pi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "5765d79db7",
    },
    Vector {
        name: "quantity 12345678901234567890123456789012345",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"12345678901234567890123456789012345"},"requests":{"memory":"12345678901234567890123456789012345","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "5794c59999",
    },
    Vector {
        name: "quantity 0.3Gi",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"0.3Gi"},"requests":{"memory":"0.3Gi","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "979759877",
    },
    Vector {
        name: "quantity 1M",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"1M"},"requests":{"memory":"1M","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "7d4fd58f65",
    },
    Vector {
        name: "quantity 250k",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"250k"},"requests":{"memory":"250k","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "65d9486855",
    },
    Vector {
        name: "quantity 9223372036854775807",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"9223372036854775807"},"requests":{"memory":"9223372036854775807","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "6bd7b45dff",
    },
    Vector {
        name: "quantity 9223372036854775808",
        template: r#"{"spec":{"containers":[{"name":"q","image":"i","resources":{"limits":{"cpu":"9223372036854775808"},"requests":{"memory":"9223372036854775808","ephemeral-storage":"1Gi"}}}]}}"#,
        collision_count: None,
        hash: "688c7d6bc9",
    },
    Vector {
        name: "probes and lifecycle",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","livenessProbe":{"exec":{"command":["cat","/tmp/healthy"]},"initialDelaySeconds":5,"periodSeconds":5,"timeoutSeconds":1,"successThreshold":1,"failureThreshold":3,"terminationGracePeriodSeconds":10},"readinessProbe":{"tcpSocket":{"port":"http"},"periodSeconds":10,"timeoutSeconds":1,"successThreshold":1,"failureThreshold":3},"startupProbe":{"grpc":{"port":9000,"service":""},"periodSeconds":10,"timeoutSeconds":1,"successThreshold":1,"failureThreshold":30},"lifecycle":{"preStop":{"sleep":{"seconds":5}},"postStart":{"httpGet":{"path":"/x","port":8080,"host":"h","scheme":"HTTPS","httpHeaders":[{"name":"A","value":"b"}]}},"stopSignal":"SIGTERM"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "677c7d4775",
    },
    Vector {
        name: "volumes of several kinds",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","volumeMounts":[{"name":"cfg","mountPath":"/etc/cfg","readOnly":true},{"name":"tmp","mountPath":"/tmp","subPathExpr":"$(POD)","mountPropagation":"None"},{"name":"sec","mountPath":"/s","readOnly":true,"recursiveReadOnly":"IfPossible"}],"volumeDevices":[{"name":"pvc","devicePath":"/dev/xvda"}]}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","volumes":[{"name":"cfg","configMap":{"name":"cm","defaultMode":420,"items":[{"key":"a","path":"a.txt","mode":256}]}},{"name":"sec","secret":{"secretName":"s","defaultMode":420,"optional":true}},{"name":"tmp","emptyDir":{}},{"name":"mem","emptyDir":{"medium":"Memory","sizeLimit":"64Mi"}},{"name":"host","hostPath":{"path":"/var/log","type":"Directory"}},{"name":"pvc","persistentVolumeClaim":{"claimName":"data","readOnly":true}},{"name":"proj","projected":{"defaultMode":420,"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}},{"clusterTrustBundle":{"signerName":"x/y","labelSelector":{"matchLabels":{"a":"b"}},"path":"b.pem"}}]}},{"name":"dapi","downwardAPI":{"defaultMode":420,"items":[{"path":"cpu","resourceFieldRef":{"containerName":"nginx","resource":"limits.cpu","divisor":"1m"}}]}},{"name":"nfs","nfs":{"server":"nfs.local","path":"/exports"}},{"name":"csi","csi":{"driver":"d.example.com","readOnly":true,"volumeAttributes":{"z":"1","a":"2"},"nodePublishSecretRef":{"name":"n"}}},{"name":"eph","ephemeral":{"volumeClaimTemplate":{"metadata":{"labels":{"t":"v"}},"spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"fast","resources":{"requests":{"storage":"1Gi"}},"volumeMode":"Filesystem"}}}},{"name":"img","image":{"reference":"busybox:1","pullPolicy":"IfNotPresent"}},{"name":"iscsi","iscsi":{"targetPortal":"10.0.0.1:3260","iqn":"iqn.x","lun":0,"portals":["a"],"chapAuthSession":true}},{"name":"azd","azureDisk":{"diskName":"d","diskURI":"u","cachingMode":"ReadWrite","fsType":"ext4","readOnly":false,"kind":"Managed"}}]}}"#,
        collision_count: None,
        hash: "5695b8f8c9",
    },
    Vector {
        name: "env valueFrom envFrom command args",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","env":[{"name":"POD","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}},{"name":"CPU","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}},{"name":"CM","valueFrom":{"configMapKeyRef":{"name":"cm","key":"k","optional":false}}},{"name":"SK","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}},{"name":"EMPTY","value":""}],"envFrom":[{"prefix":"P_","configMapRef":{"name":"cm"}},{"secretRef":{"name":"s","optional":true}}],"command":["/bin/sh","-c"],"args":["echo hello; sleep 3600"],"workingDir":"/work"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "87ffff9f7",
    },
    Vector {
        name: "tolerations affinity scheduling",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoSchedule"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]}]},"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["n1"]}]}}]},"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["nginx"]}]},"topologyKey":"kubernetes.io/hostname","matchLabelKeys":["pod-template-hash"]}}]},"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"db"}},"namespaces":["db"],"topologyKey":"zone","namespaceSelector":{}}]}},"nodeSelector":{"kubernetes.io/os":"linux","disk":"ssd"},"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"nginx"}},"minDomains":2,"nodeAffinityPolicy":"Honor","nodeTaintsPolicy":"Ignore","matchLabelKeys":["pod-template-hash"]}],"priorityClassName":"high","priority":1000,"preemptionPolicy":"PreemptLowerPriority","enableServiceLinks":true,"schedulingGates":[{"name":"g"}],"readinessGates":[{"conditionType":"example.com/ready"}],"os":{"name":"linux"},"hostAliases":[{"ip":"1.2.3.4","hostnames":["a","b"]}],"dnsConfig":{"nameservers":["1.1.1.1"],"searches":["svc"],"options":[{"name":"ndots","value":"2"},{"name":"edns0"}]},"overhead":{"memory":"120Mi","cpu":"250m"}}}"#,
        collision_count: None,
        hash: "d695ccd59",
    },
    Vector {
        name: "security contexts and host settings",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"],"add":["NET_BIND_SERVICE"]},"readOnlyRootFilesystem":true,"privileged":false,"procMount":"Default","windowsOptions":{"hostProcess":false,"runAsUserName":"u"}}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{"runAsUser":1000,"runAsGroup":3000,"fsGroup":2000,"runAsNonRoot":true,"supplementalGroups":[4000,5000],"supplementalGroupsPolicy":"Merge","seccompProfile":{"type":"RuntimeDefault"},"sysctls":[{"name":"net.ipv4.ip_local_port_range","value":"1024 65535"}],"fsGroupChangePolicy":"OnRootMismatch","seLinuxOptions":{"level":"s0:c123,c456"},"appArmorProfile":{"type":"Localhost","localhostProfile":"p"},"seLinuxChangePolicy":"MountOption"},"schedulerName":"default-scheduler","hostUsers":false,"shareProcessNamespace":true,"serviceAccountName":"sa","serviceAccount":"sa","automountServiceAccountToken":false,"imagePullSecrets":[{"name":"regcred"}],"hostNetwork":true,"hostPID":true,"hostIPC":true,"hostname":"h","subdomain":"s","setHostnameAsFQDN":true,"runtimeClassName":"gvisor","activeDeadlineSeconds":600}}"#,
        collision_count: None,
        hash: "5485d64bdf",
    },
    Vector {
        name: "empty container securityContext",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","securityContext":{}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "7cd5fd89fb",
    },
    Vector {
        name: "absent pod securityContext",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "c44f586d6",
    },
    Vector {
        name: "labels annotations unicode owner refs",
        template: r#"{"metadata":{"labels":{"app":"nginx","tier":"web","a.b/c":"d","Z":"z"},"annotations":{"kubectl.kubernetes.io/restartedAt":"2024-05-01T10:00:00Z","note":"\u00fcn\u00efc\u00f8d\u00e9 \u2713 \u65e5\u672c","esc":"tab\there \"q\" nl\nx \u0007 \u00ff"},"name":"n","namespace":"ns","generateName":"g-","finalizers":["f"],"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"u-1","controller":true,"blockOwnerDeletion":true}]},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "559f754b5c",
    },
    Vector {
        name: "empty maps and lists are nil",
        template: r#"{"metadata":{"labels":{},"annotations":{}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"limits":{},"requests":{}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","env":[]}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","nodeSelector":{},"tolerations":[]}}"#,
        collision_count: None,
        hash: "6d577777",
    },
    Vector {
        name: "init containers sidecars claims pod resources",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"},{"name":"sidecar","image":"envoy","ports":[{"containerPort":9901,"hostPort":9901,"hostIP":"0.0.0.0","name":"admin","protocol":"UDP"}]}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","initContainers":[{"name":"init","image":"busybox","command":["sh","-c","true"],"restartPolicy":"Always","resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"},{"resourceName":"memory","restartPolicy":"RestartContainer"}],"resources":{"claims":[{"name":"gpu","request":"r"}]},"stdin":true,"stdinOnce":true,"tty":true,"terminationMessagePolicy":"FallbackToLogsOnError"}],"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"},{"name":"x","resourceClaimName":"c"}],"resources":{"limits":{"cpu":"2","memory":"2Gi"}}}}"#,
        collision_count: None,
        hash: "758545d6f5",
    },
    Vector {
        name: "non-zero creationTimestamp",
        template: r#"{"metadata":{"creationTimestamp":"2024-03-01T12:34:56Z","labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "687dd8d6f5",
    },
    Vector {
        name: "with pod-template-hash label",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx","pod-template-hash":"abc"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
        collision_count: None,
        hash: "854497d44d",
    },
    Vector {
        name: "cats version 0",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.0.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: None,
        hash: "5ddb68d974",
    },
    Vector {
        name: "cats version 1",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.1.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: Some(1),
        hash: "f4cb58964",
    },
    Vector {
        name: "cats version 2",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.2.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: None,
        hash: "7b87f86c44",
    },
    Vector {
        name: "cats version 3",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.3.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: Some(3),
        hash: "6fdc6c645b",
    },
    Vector {
        name: "cats version 4",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"cats"}},"spec":{"containers":[{"name":"cats","image":"registry/test/cats:v0.4.0","ports":[{"name":"http","containerPort":9077,"protocol":"TCP"}],"env":[{"name":"DEPLOYMENT_ENVIRONMENT","value":"cats-stubbed-functional"},{"name":"APP_NAME","value":"cats"}],"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":30,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/private/status","port":9077,"scheme":"HTTP"},"initialDelaySeconds":1,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{}}}"#,
        collision_count: None,
        hash: "86c76d9458",
    },
    Vector {
        name: "v1.36 fields set",
        template: r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"v136"}},"spec":{"volumes":[{"name":"cfg","emptyDir":{}},{"name":"cert","projected":{"sources":[{"podCertificate":{"signerName":"example.com/signer","keyType":"ED25519","maxExpirationSeconds":86400,"credentialBundlePath":"bundle.pem","userAnnotations":{"b":"2","a":"1"}}}],"defaultMode":420}}],"initContainers":[{"name":"sidecar","image":"busybox:1.37","restartPolicy":"Always","restartPolicyRules":[{"action":"Restart","exitCodes":{"operator":"In","values":[42,43]}}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"containers":[{"name":"app","image":"nginx:1.29","env":[{"name":"TOKEN","valueFrom":{"fileKeyRef":{"volumeName":"cfg","path":"env.txt","key":"TOKEN","optional":false}}}],"restartPolicy":"Never","restartPolicyRules":[{"action":"Restart","exitCodes":{"operator":"NotIn","values":[0]}}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","hostnameOverride":"custom-host","schedulingGroup":{"podGroupName":"gang-1"}}}"#,
        collision_count: None,
        hash: "57845b67fd",
    },
];

/// The full spew text of the "nginx defaulted" vector.
pub(super) const NGINX_SPEW: &str = r#"(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) GenerateName:(string) Namespace:(string) SelfLink:(string) UID:(types.UID) ResourceVersion:(string) Generation:(int64)0 CreationTimestamp:(v1.Time){Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}} DeletionTimestamp:(*v1.Time)<nil> DeletionGracePeriodSeconds:(*int64)<nil> Labels:(map[string]string)map[app:nginx] Annotations:(map[string]string)<nil> OwnerReferences:([]v1.OwnerReference)<nil> Finalizers:([]string)<nil> ManagedFields:([]v1.ManagedFieldsEntry)<nil>} Spec:(v1.PodSpec){Volumes:([]v1.Volume)<nil> InitContainers:([]v1.Container)<nil> Containers:([]v1.Container)[{Name:(string)nginx Image:(string)nginx:1.14.2 Command:([]string)<nil> Args:([]string)<nil> WorkingDir:(string) Ports:([]v1.ContainerPort)[{Name:(string) HostPort:(int32)0 ContainerPort:(int32)80 Protocol:(v1.Protocol)TCP HostIP:(string)}] EnvFrom:([]v1.EnvFromSource)<nil> Env:([]v1.EnvVar)<nil> Resources:(v1.ResourceRequirements){Limits:(v1.ResourceList)<nil> Requests:(v1.ResourceList)<nil> Claims:([]v1.ResourceClaim)<nil>} ResizePolicy:([]v1.ContainerResizePolicy)<nil> RestartPolicy:(*v1.ContainerRestartPolicy)<nil> RestartPolicyRules:([]v1.ContainerRestartRule)<nil> VolumeMounts:([]v1.VolumeMount)<nil> VolumeDevices:([]v1.VolumeDevice)<nil> LivenessProbe:(*v1.Probe)<nil> ReadinessProbe:(*v1.Probe)<nil> StartupProbe:(*v1.Probe)<nil> Lifecycle:(*v1.Lifecycle)<nil> TerminationMessagePath:(string)/dev/termination-log TerminationMessagePolicy:(v1.TerminationMessagePolicy)File ImagePullPolicy:(v1.PullPolicy)IfNotPresent SecurityContext:(*v1.SecurityContext)<nil> Stdin:(bool)false StdinOnce:(bool)false TTY:(bool)false}] EphemeralContainers:([]v1.EphemeralContainer)<nil> RestartPolicy:(v1.RestartPolicy)Always TerminationGracePeriodSeconds:(*int64)30 ActiveDeadlineSeconds:(*int64)<nil> DNSPolicy:(v1.DNSPolicy)ClusterFirst NodeSelector:(map[string]string)<nil> ServiceAccountName:(string) DeprecatedServiceAccount:(string) AutomountServiceAccountToken:(*bool)<nil> NodeName:(string) HostNetwork:(bool)false HostPID:(bool)false HostIPC:(bool)false ShareProcessNamespace:(*bool)<nil> SecurityContext:(*v1.PodSecurityContext){SELinuxOptions:(*v1.SELinuxOptions)<nil> WindowsOptions:(*v1.WindowsSecurityContextOptions)<nil> RunAsUser:(*int64)<nil> RunAsGroup:(*int64)<nil> RunAsNonRoot:(*bool)<nil> SupplementalGroups:([]int64)<nil> SupplementalGroupsPolicy:(*v1.SupplementalGroupsPolicy)<nil> FSGroup:(*int64)<nil> Sysctls:([]v1.Sysctl)<nil> FSGroupChangePolicy:(*v1.PodFSGroupChangePolicy)<nil> SeccompProfile:(*v1.SeccompProfile)<nil> AppArmorProfile:(*v1.AppArmorProfile)<nil> SELinuxChangePolicy:(*v1.PodSELinuxChangePolicy)<nil>} ImagePullSecrets:([]v1.LocalObjectReference)<nil> Hostname:(string) Subdomain:(string) Affinity:(*v1.Affinity)<nil> SchedulerName:(string)default-scheduler Tolerations:([]v1.Toleration)<nil> HostAliases:([]v1.HostAlias)<nil> PriorityClassName:(string) Priority:(*int32)<nil> DNSConfig:(*v1.PodDNSConfig)<nil> ReadinessGates:([]v1.PodReadinessGate)<nil> RuntimeClassName:(*string)<nil> EnableServiceLinks:(*bool)<nil> PreemptionPolicy:(*v1.PreemptionPolicy)<nil> Overhead:(v1.ResourceList)<nil> TopologySpreadConstraints:([]v1.TopologySpreadConstraint)<nil> SetHostnameAsFQDN:(*bool)<nil> OS:(*v1.PodOS)<nil> HostUsers:(*bool)<nil> SchedulingGates:([]v1.PodSchedulingGate)<nil> ResourceClaims:([]v1.PodResourceClaim)<nil> Resources:(*v1.ResourceRequirements)<nil> HostnameOverride:(*string)<nil> SchedulingGroup:(*v1.PodSchedulingGroup)<nil>}}"#;

/// The full spew text of the "quantity 1.5Gi" vector.
pub(super) const QUANTITY_1_5GI_SPEW: &str = r#"(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) GenerateName:(string) Namespace:(string) SelfLink:(string) UID:(types.UID) ResourceVersion:(string) Generation:(int64)0 CreationTimestamp:(v1.Time){Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}} DeletionTimestamp:(*v1.Time)<nil> DeletionGracePeriodSeconds:(*int64)<nil> Labels:(map[string]string)<nil> Annotations:(map[string]string)<nil> OwnerReferences:([]v1.OwnerReference)<nil> Finalizers:([]string)<nil> ManagedFields:([]v1.ManagedFieldsEntry)<nil>} Spec:(v1.PodSpec){Volumes:([]v1.Volume)<nil> InitContainers:([]v1.Container)<nil> Containers:([]v1.Container)[{Name:(string)q Image:(string)i Command:([]string)<nil> Args:([]string)<nil> WorkingDir:(string) Ports:([]v1.ContainerPort)<nil> EnvFrom:([]v1.EnvFromSource)<nil> Env:([]v1.EnvVar)<nil> Resources:(v1.ResourceRequirements){Limits:(v1.ResourceList)map[cpu:{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)false abs:(big.nat)[1610612736000000000]} scale:(inf.Scale)9}} s:(string) Format:(resource.Format)BinarySI}] Requests:(v1.ResourceList)map[ephemeral-storage:{i:(resource.int64Amount){value:(int64)1073741824 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)1Gi Format:(resource.Format)BinarySI} memory:{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)false abs:(big.nat)[1610612736000000000]} scale:(inf.Scale)9}} s:(string) Format:(resource.Format)BinarySI}] Claims:([]v1.ResourceClaim)<nil>} ResizePolicy:([]v1.ContainerResizePolicy)<nil> RestartPolicy:(*v1.ContainerRestartPolicy)<nil> RestartPolicyRules:([]v1.ContainerRestartRule)<nil> VolumeMounts:([]v1.VolumeMount)<nil> VolumeDevices:([]v1.VolumeDevice)<nil> LivenessProbe:(*v1.Probe)<nil> ReadinessProbe:(*v1.Probe)<nil> StartupProbe:(*v1.Probe)<nil> Lifecycle:(*v1.Lifecycle)<nil> TerminationMessagePath:(string) TerminationMessagePolicy:(v1.TerminationMessagePolicy) ImagePullPolicy:(v1.PullPolicy) SecurityContext:(*v1.SecurityContext)<nil> Stdin:(bool)false StdinOnce:(bool)false TTY:(bool)false}] EphemeralContainers:([]v1.EphemeralContainer)<nil> RestartPolicy:(v1.RestartPolicy) TerminationGracePeriodSeconds:(*int64)<nil> ActiveDeadlineSeconds:(*int64)<nil> DNSPolicy:(v1.DNSPolicy) NodeSelector:(map[string]string)<nil> ServiceAccountName:(string) DeprecatedServiceAccount:(string) AutomountServiceAccountToken:(*bool)<nil> NodeName:(string) HostNetwork:(bool)false HostPID:(bool)false HostIPC:(bool)false ShareProcessNamespace:(*bool)<nil> SecurityContext:(*v1.PodSecurityContext)<nil> ImagePullSecrets:([]v1.LocalObjectReference)<nil> Hostname:(string) Subdomain:(string) Affinity:(*v1.Affinity)<nil> SchedulerName:(string) Tolerations:([]v1.Toleration)<nil> HostAliases:([]v1.HostAlias)<nil> PriorityClassName:(string) Priority:(*int32)<nil> DNSConfig:(*v1.PodDNSConfig)<nil> ReadinessGates:([]v1.PodReadinessGate)<nil> RuntimeClassName:(*string)<nil> EnableServiceLinks:(*bool)<nil> PreemptionPolicy:(*v1.PreemptionPolicy)<nil> Overhead:(v1.ResourceList)<nil> TopologySpreadConstraints:([]v1.TopologySpreadConstraint)<nil> SetHostnameAsFQDN:(*bool)<nil> OS:(*v1.PodOS)<nil> HostUsers:(*bool)<nil> SchedulingGates:([]v1.PodSchedulingGate)<nil> ResourceClaims:([]v1.PodResourceClaim)<nil> Resources:(*v1.ResourceRequirements)<nil> HostnameOverride:(*string)<nil> SchedulingGroup:(*v1.PodSchedulingGroup)<nil>}}"#;
