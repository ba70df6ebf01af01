# The main job of `make run`: a small program that shows where it runs.
import os
import platform

print("hello from nsbox")
print(f"python {platform.python_version()} as uid {os.getuid()}, parent pid {os.getppid()}, host {platform.node()}")
print(f"cwd {os.getcwd()}, writable: /workspace={os.access('/workspace', os.W_OK)}, /usr={os.access('/usr', os.W_OK)}")
with open("/workspace/result.txt", "w") as f:
    f.write(str(6 * 7))
print("wrote /workspace/result.txt:", open("/workspace/result.txt").read())
