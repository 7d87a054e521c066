#!/usr/bin/python3
"""A second API client: stubs generated now from proto/ with protoc + grpc_python_plugin.

Usage: api_client.py <proto dir> <socket path>. Calls GetReport, reads one WatchFindings event
and prints "report <node> <netns count> <finding count>" and "event <kind> <code>".
"""
import os
import subprocess
import sys
import tempfile


def main():
    proto_dir, socket_path = sys.argv[1], sys.argv[2]
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

        with grpc.insecure_channel("unix:" + socket_path) as channel:
            stub = rpc.AmbientDoctorStub(channel)
            report = stub.GetReport(pb.GetReportRequest(), timeout=10)
            print("report", report.node.name, len(report.netns), len(report.findings))
            for event in stub.WatchFindings(pb.WatchFindingsRequest(), timeout=10):
                print("event", pb.FindingEvent.Kind.Name(event.kind), event.finding.code)
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
