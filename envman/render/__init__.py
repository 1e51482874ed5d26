"""Rendering a resolved stack into a build context: the Dockerfile from the templates, and the wheels it gets."""
