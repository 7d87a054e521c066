#!/usr/bin/python3
"""A second API client: stubs generated now from proto/ with protoc + grpc_python_plugin.

Usage: api_client.py <proto dir> <socket path>
       api_client.py <proto dir> --tls <host:port> <CA file> [<client cert> <client key>]
Calls GetReport, reads one WatchFindings event and prints "report <node> <netns count> <finding
count>" and "event <kind> <code>". With --tls it talks to the TCP listener (serve --api-address),
trusting the CA file and, when given, presenting the client certificate (mutual TLS).
"""
import os
import subprocess
import sys
import tempfile


def main():
    proto_dir = sys.argv[1]
    tls = sys.argv[2] == "--tls"
    with tempfile.TemporaryDirectory(prefix="ad-pystubs-") as out:
        plugin = subprocess.run(["which", "grpc_python_plugin"], capture_output=True, text=True,
                                check=True).stdout.strip()
        subprocess.run(["protoc", "-I", proto_dir, "--python_out=" + out,
                        "--grpc_python_out=" + out, "--plugin=protoc-gen-grpc_python=" + plugin,
                        "ambientdoctor/v1/ambient_doctor.proto"], check=True)
        sys.path.insert(0, out)
        import grpc
        from ambientdoctor.v1 import ambient_doctor_pb2 as pb
        from ambientdoctor.v1 import ambient_doctor_pb2_grpc as rpc

        if tls:
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            target, files = sys.argv[3], [read(path) for path in sys.argv[4:7]]
            credentials = grpc.ssl_channel_credentials(
                root_certificates=files[0],
                private_key=files[2] if len(files) > 2 else None,
                certificate_chain=files[1] if len(files) > 1 else None)
            channel = grpc.secure_channel(target, credentials)
        else:
            channel = grpc.insecure_channel("unix:" + sys.argv[2])
        with channel:
            stub = rpc.AmbientDoctorStub(channel)
            report = stub.GetReport(pb.GetReportRequest(), timeout=10)
            print("report", report.node.name, len(report.netns), len(report.findings))
            for event in stub.WatchFindings(pb.WatchFindingsRequest(), timeout=10):
                print("event", pb.FindingEvent.Kind.Name(event.kind), event.finding.code)
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
