// The admin's periodic task form (templates/admin/djcelery/change_periodictask_form.html): what
// django-celery-beat does in an inline script, which the Content-Security-Policy forbids. The
// crontab's help text says in words what the chosen schedule means.
(function ($) {
  const readable = JSON.parse(document.getElementById("readable-crontabs").textContent);
  const help = $(".field-crontab .help");
  const original = help.html();
  $(".field-crontab_translation").hide();
  $(".field-crontab").change(function () {
    const words = readable[$("#id_crontab").val()];
    help.html(original).append("<br>", document.createTextNode("Translation: " + words));
  });
})(django.jQuery);
