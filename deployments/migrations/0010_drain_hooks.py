# Drain hooks an administrator keeps; the drain grace a deployment gives its engine (and each
# revision was written with); where a change job left its host in the load balancer's rotation.

import deployments.drain_hooks
import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deployments', '0009_rejections_never_expire'),
    ]

    operations = [
        migrations.CreateModel(
            name='DrainHook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(help_text='What requests choose it by.', max_length=64, unique=True)),
                ('description', models.CharField(blank=True, max_length=300)),
                ('kind', models.CharField(choices=[('command', 'a command on the host'), ('http', 'an HTTP call, sent from the host')], max_length=10)),
                ('drain_command', models.CharField(blank=True, help_text="The program's absolute path, then its words, separated by spaces (no quotes: no word may hold a space or a shell character). {host}, {unit} and {port} are filled in from the change.", max_length=1000, validators=[deployments.drain_hooks.validate_hook_command])),
                ('undrain_command', models.CharField(blank=True, help_text="The program's absolute path, then its words, separated by spaces (no quotes: no word may hold a space or a shell character). {host}, {unit} and {port} are filled in from the change.", max_length=1000, validators=[deployments.drain_hooks.validate_hook_command])),
                ('drain_method', models.CharField(choices=[('POST', 'POST'), ('PUT', 'PUT'), ('DELETE', 'DELETE'), ('PATCH', 'PATCH'), ('GET', 'GET')], default='POST', max_length=6)),
                ('drain_url', models.CharField(blank=True, help_text='http:// or https://, sent from the host with curl (no redirects followed); no credentials in it. {host}, {unit} and {port} may appear in its path and query.', max_length=500, validators=[deployments.drain_hooks.validate_hook_url])),
                ('undrain_method', models.CharField(choices=[('POST', 'POST'), ('PUT', 'PUT'), ('DELETE', 'DELETE'), ('PATCH', 'PATCH'), ('GET', 'GET')], default='POST', max_length=6)),
                ('undrain_url', models.CharField(blank=True, help_text='http:// or https://, sent from the host with curl (no redirects followed); no credentials in it. {host}, {unit} and {port} may appear in its path and query.', max_length=500, validators=[deployments.drain_hooks.validate_hook_url])),
                ('timeout_seconds', models.PositiveSmallIntegerField(default=30, help_text='How long each call may take before it counts as failed.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(300)])),
                ('enabled', models.BooleanField(default=True, help_text='Only enabled hooks can be chosen, and only they run.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='changerequest',
            name='drain_state',
            field=models.CharField(blank=True, choices=[('', 'not drained'), ('draining', 'drain hook sent'), ('drained', 'out of rotation'), ('undrained', 'back in rotation'), ('undrain_failed', 'putting it back failed')], default='', max_length=20),
        ),
        migrations.AddField(
            model_name='deployment',
            name='drain_grace_seconds',
            field=models.PositiveIntegerField(default=0, help_text="How long a stopping server lets the requests in flight finish (0: it aborts them). vLLM gets --shutdown-timeout with it; systemd's TimeoutStopSec= is set longer (unit_files.units.STOP_MARGIN_SECONDS more); SGLang drains on SIGTERM by itself and gets TimeoutStopSec= only. Written by the next redeploy or model swap.", validators=[django.core.validators.MaxValueValidator(3600)]),
        ),
        migrations.AddField(
            model_name='deploymentrevision',
            name='drain_grace_seconds',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
