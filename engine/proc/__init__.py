"""The client processes: starting a role as an OS process (`processes`), building the Java
roles (`java_roles`), the leash that stops a process whose parent died (`leash`), and the
fault points a role stops itself at (`failpoints`).
"""
