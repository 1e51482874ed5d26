# envman devcontainer image for My_Proj.v2: the run image plus a named user that
# updateRemoteUserUID maps to your uid (envman run uses --user for the same). Generated.
FROM reg.example:5000/envman/x@sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd
USER root
RUN getent passwd envman >/dev/null || { uid=1000; while getent passwd "$uid" >/dev/null; do uid=$((uid + 1)); done; \
      getent group "$uid" >/dev/null || echo "envman:x:$uid:" >>/etc/group; \
      echo "envman:x:$uid:$uid:envman user:/home/envman:/bin/sh" >>/etc/passwd; }
